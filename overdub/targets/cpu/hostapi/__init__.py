"""numba-cuda's host API on the CPU target: what ``from overdub import cuda`` gives where kernels run on the CPU.

Each name here stands in for numba-cuda's function or class of the same name, with its behaviour on host
memory, which is the CPU target's device memory: device arrays (:mod:`.arrays`), streams and events
(:mod:`.streams`), the device and its context (:mod:`.devices`), ``cuda.reduce`` (:mod:`.reduction`),
``cuda.vectorize`` and ``cuda.guvectorize`` (:mod:`.ufuncs`). The
namespace (:mod:`overdub.cuda`) takes them from :data:`HOST_API` on the CPU target (the target's ``host_api``),
and numba-cuda's own on the CUDA target.
"""

from __future__ import annotations

from . import arrays, devices, random, reduction, streams, ufuncs

__all__ = ["HOST_API", "STAND_INS"]

HOST_API: dict[str, object] = {
    name: getattr(module, name)
    for module in (arrays, streams, devices, reduction, ufuncs)
    for name in module.__all__
    if name
    not in ("DeviceNDArray", "Stream", "Event", "Device", "Context", "PendingDeallocations")  # not names of numba.cuda
}
"""numba-cuda's host-API names and what each is on the CPU target."""

STAND_INS: dict[str, dict[str, object]] = {
    "numba.cuda": HOST_API,
    "numba.cuda.random": {name: getattr(random, name) for name in random.__all__},
}
"""Each numba-cuda namespace with stand-ins on the CPU target, and its stand-ins."""
