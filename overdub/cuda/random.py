"""``overdub.cuda.random``: numba-cuda's random number generator (``numba.cuda.random``), its states made where
kernels run.

The device functions (``xoroshiro128p_uniform_float32``, ``xoroshiro128p_normal_float64``, ...) are numba-cuda's
own, which kernels call on either target. ``create_xoroshiro128p_states`` and ``init_xoroshiro128p_states`` are
numba-cuda's on the CUDA target; on the CPU target they make the same states (numba-cuda computes them on the
host, then copies them to the GPU) in a device array of the CPU target.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from . import cpu


def _numba_random() -> ModuleType:
    import numba.cuda.random  # on first use: it compiles nothing, but need not be imported with overdub

    return numba.cuda.random


def _init_states_on_cpu(states: Any, seed: int, subsequence_start: int = 0, stream: object = 0) -> None:
    """numba-cuda's ``init_xoroshiro128p_states`` for a device array of the CPU target."""
    host = np.empty(shape=states.shape, dtype=_numba_random().xoroshiro128p_dtype)
    _numba_random().init_xoroshiro128p_states_cpu(host, seed, subsequence_start)
    states.copy_to_device(host, stream=stream)


def _create_states_on_cpu(n: int, seed: int, subsequence_start: int = 0, stream: object = 0) -> Any:
    """numba-cuda's ``create_xoroshiro128p_states``: ``n`` generators' states, each 2**64 steps after the last
    (``subsequence_start`` jumps before the first), in a device array of the CPU target."""
    states = cpu.arrays.device_array(n, dtype=_numba_random().xoroshiro128p_dtype, stream=stream)
    _init_states_on_cpu(states, seed, subsequence_start, stream)
    return states


_ON_CPU = {"create_xoroshiro128p_states": _create_states_on_cpu, "init_xoroshiro128p_states": _init_states_on_cpu}


def __getattr__(name: str) -> object:
    """numba-cuda's name, or on the CPU target its stand-in; kept in this module's globals once asked."""
    if name == "__all__":  # `from overdub.cuda.random import *`: numba-cuda's names
        return [n for n in dir(_numba_random()) if not n.startswith("_")]
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _ON_CPU[name] if name in _ON_CPU and cpu.in_use() else getattr(_numba_random(), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_numba_random())))
