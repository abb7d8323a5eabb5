"""``overdub.cuda.random``: numba-cuda's random number generator (``numba.cuda.random``), its states made where
kernels run.

The device functions (``xoroshiro128p_uniform_float32``, ``xoroshiro128p_normal_float64``, ...) are numba-cuda's
own, which kernels call on either target. ``create_xoroshiro128p_states`` and ``init_xoroshiro128p_states`` are
numba-cuda's on the CUDA target; on the CPU target they make the same states (numba-cuda computes them on the
host, then copies them to the GPU) in a device array of the CPU target.
"""

from __future__ import annotations

from types import ModuleType

from ..targets import get_target, registry


def _numba_random() -> ModuleType:
    import numba.cuda.random  # on first use: it compiles nothing, but need not be imported with overdub

    return numba.cuda.random


def __getattr__(name: str) -> object:
    """numba-cuda's name, or on the CPU target its stand-in; kept in this module's globals once asked."""
    if name == "__all__":  # `from overdub.cuda.random import *`: numba-cuda's names
        return [n for n in dir(_numba_random()) if not n.startswith("_")]
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    stand_ins = registry.entry(get_target(None).name).stand_ins("numba.cuda.random") or {}
    value = stand_ins[name] if name in stand_ins else getattr(_numba_random(), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_numba_random())))
