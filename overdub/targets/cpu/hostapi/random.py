"""numba-cuda's random number generator's host API on the CPU target: its states made in a device array of the CPU
target (numba-cuda computes them on the host, then copies them to the GPU; here the copy is the array)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from . import arrays

__all__ = ["create_xoroshiro128p_states", "init_xoroshiro128p_states"]


def _numba_random() -> ModuleType:
    import numba.cuda.random  # on first use: it compiles nothing, but need not be imported with overdub

    return numba.cuda.random


def init_xoroshiro128p_states(states: Any, seed: int, subsequence_start: int = 0, stream: object = 0) -> None:
    """numba-cuda's ``init_xoroshiro128p_states`` for a device array of the CPU target."""
    host = np.empty(shape=states.shape, dtype=_numba_random().xoroshiro128p_dtype)
    _numba_random().init_xoroshiro128p_states_cpu(host, seed, subsequence_start)
    states.copy_to_device(host, stream=stream)


def create_xoroshiro128p_states(n: int, seed: int, subsequence_start: int = 0, stream: object = 0) -> Any:
    """numba-cuda's ``create_xoroshiro128p_states``: ``n`` generators' states, each 2**64 steps after the last
    (``subsequence_start`` jumps before the first), in a device array of the CPU target."""
    states = arrays.device_array(n, dtype=_numba_random().xoroshiro128p_dtype, stream=stream)
    init_xoroshiro128p_states(states, seed, subsequence_start, stream)
    return states
