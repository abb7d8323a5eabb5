"""numba-cuda's host API on the CPU target: what ``from overdub import cuda`` gives where kernels run on the CPU.

Each name here stands in for numba-cuda's function or class of the same name, with its behaviour on host
memory, which is the CPU target's device memory: device arrays (:mod:`.arrays`), streams and events
(:mod:`.streams`), the device and its context (:mod:`.devices`), ``cuda.reduce`` (:mod:`.reduction`),
``cuda.vectorize`` and ``cuda.guvectorize`` (:mod:`.ufuncs`). The
namespace (:mod:`overdub.cuda`) takes them from :data:`HOST_API` on the CPU target, and numba-cuda's own on the
CUDA target.
"""

from __future__ import annotations

from ...targets import get_target
from . import arrays, devices, reduction, streams, ufuncs

__all__ = ["HOST_API", "in_use"]


def in_use() -> bool:
    """Do launches run on the CPU target by default (no usable GPU, or ``OVERDUB_TARGET=cpu``)? Asked as
    launches ask it: fixed at the first launch or question."""
    return get_target(None).name == "cpu"


HOST_API: dict[str, object] = {
    name: getattr(module, name)
    for module in (arrays, streams, devices, reduction, ufuncs)
    for name in module.__all__
    if name not in ("DeviceNDArray", "Stream", "Event", "Device", "Context")  # not names of numba.cuda
}
"""numba-cuda's host-API names and what each is on the CPU target."""
