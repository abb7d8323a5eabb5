"""The machine's GPU as the targets see it: is one usable (asked once). Each device's compute capability is
the CUDA target's to ask (``overdub.targets.cuda.device_cc``).

numba-cuda answers it, but importing it takes longer than importing numba itself. Where no NVIDIA driver
can be loaded -- no ``libcuda`` where numba-cuda looks for one -- there is no usable GPU, and numba-cuda is
not imported to say so: a program on a machine without a GPU, launching on the CPU target, never imports it
unless it names it. Where a driver loads, numba-cuda is asked (the first launch or question, not ``import
overdub``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

from numba.core import config

from ..runtime import runtime

__all__ = ["gpu_usable", "DEFAULT_CC"]

DEFAULT_CC = (9, 0)

# numba internals: the names numba-cuda loads the driver by on Linux, in the loader's path and then in these
# directories (numba.cuda.cudadrv.driver.locate_driver_and_loader), unless NUMBA_CUDA_DRIVER names a file
_DRIVER_NAMES = ("libcuda.so", "libcuda.so.1")
_DRIVER_DIRECTORIES = ("/usr/lib", "/usr/lib64")


def _driver_loadable() -> bool:
    """Can the NVIDIA driver be loaded where numba-cuda looks for it? (Elsewhere than Linux, or where
    ``NUMBA_CUDA_DRIVER`` is set, numba-cuda alone knows: yes, ask it.)"""
    if not sys.platform.startswith("linux") or getattr(config, "CUDA_DRIVER", None):  # (numba reads it at import)
        return True
    candidates = [*_DRIVER_NAMES, *(os.path.join(d, n) for d in _DRIVER_DIRECTORIES for n in _DRIVER_NAMES)]
    for candidate in candidates:
        try:
            ctypes.CDLL(candidate)
        except OSError:
            continue
        return True
    return False


@functools.cache
def gpu_usable() -> bool:
    """Whether numba-cuda finds a usable GPU: no where the driver cannot be loaded (numba-cuda not imported)."""
    if not _driver_loadable():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())  # type: ignore[no-untyped-call]
    except Exception:  # a broken driver install means no GPU, not a failed import
        return False


runtime.register_cache(f"{__name__}.gpu_usable", gpu_usable, kept="a fact of the machine, asked once")
