"""Launching: ``od.cuda(kernel, *args, ...)`` -- the hot path.

A launch computes a cheap key from the arguments' Python types (and, for arrays, dtype, rank and
contiguity), looks the compiled kernel up in one dict, checks its validity (a flag, and one version tag per
module it read) and hands the arguments to the target's launcher. Only on a miss does it compute numba
types, and only when the kernel is stale does anything get rewritten, typed or compiled.
"""
from __future__ import annotations

import functools
import os

import numpy as np

from . import compiler
from .context import Context
from .intrinsics import Pointer

__all__ = ["cuda", "synchronize", "default_target", "get_target"]


@functools.lru_cache(maxsize=None)
def _gpu_usable() -> bool:
    try:
        from numba import cuda as numba_cuda
        return numba_cuda.is_available()
    except Exception:
        return False


def default_target() -> str:
    """``$OVERDUB_TARGET`` if set, else "cuda" when a GPU is usable, else "cpu"."""
    return os.environ.get("OVERDUB_TARGET") or ("cuda" if _gpu_usable() else "cpu")


@functools.lru_cache(maxsize=None)
def _default_target_object():
    return _target_named(default_target())


@functools.lru_cache(maxsize=None)
def _target_named(name: str):
    if name == "cpu":
        from .targets.cpu import TARGET
        return TARGET
    if name == "cuda":
        from .targets.cuda import TARGET
        return TARGET
    raise ValueError(f"unknown target {name!r}: use 'cpu' or 'cuda'")


def get_target(name: str | None = None):
    """The target object for a name ("cpu" or "cuda"; None means :func:`default_target`)."""
    return _target_named(name or default_target())


# --- the argument key -----------------------------------------------------------------------------------

def _numpy_key(a):
    flags = a.flags
    return (np.ndarray, a.dtype, a.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable,
            flags.aligned)


def _array_key(a):
    flags = a.flags
    return (type(a), a.dtype, a.ndim, flags.c_contiguous, flags.f_contiguous)


def _pointer_key(p):
    return (Pointer, p.dtype, p.device)


_KEYS = {int: None, float: None, bool: None, complex: None, Pointer: _pointer_key, np.ndarray: _numpy_key}
_KEYS.update({t: None for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                np.uint64, np.float16, np.float32, np.float64, np.bool_, np.complex64,
                                np.complex128)})
_KEYLESS = object()


def _register_array_class(cls) -> None:
    _KEYS[cls] = _array_key


def _arg_key(value):
    """A hashable key that determines the numba type of a launch argument (its type, for scalars)."""
    cls = type(value)
    try:
        keyer = _KEYS[cls]
    except KeyError:
        if cls.__module__.startswith("cupy") and hasattr(value, "flags"):
            _register_array_class(cls)
            return _array_key(value)
        return _KEYLESS
    return cls if keyer is None else keyer(value)


def _dims(value, what: str) -> tuple[int, int, int]:
    if type(value) is int and value > 0:
        return (value, 1, 1)
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or a tuple of 1-3 positive ints, not {value!r}")
    return dims + (1,) * (3 - len(dims))


_launch_cache: dict[tuple, compiler.Kernel] = {}


def cuda(kernel, *args, threads=1, blocks=1, shmem: int = 0, stream=None, target: str | None = None,
         context: Context | None = None):
    """Launch ``kernel`` (a plain Python function) over ``blocks`` x ``threads`` in ``context``.

    The kernel and everything it calls are compiled for the argument types in the chain ``context`` ->
    its parents -> the target's base context, once; the compiled kernel is reused until something it
    consulted changes. ``target`` is "cpu" or "cuda"; by default, :func:`default_target` as it was at the
    first launch without one.
    """
    tgt = _default_target_object() if target is None else _target_named(target)
    key = (kernel, context, tgt, *map(_arg_key, args))
    compiled = _launch_cache.get(key)
    if compiled is None or not (compiled.valid and compiled.guard.fresh()) and not compiled.usable():
        compiled = compiler.cached_kernel(kernel, tuple(map(tgt.typeof, args)), (context or tgt.base).chain(tgt))
        if _KEYLESS not in key:
            _launch_cache[key] = compiled
    compiler.count_launch()
    compiled.launcher.launch(args, _dims(blocks, "blocks"), _dims(threads, "threads"), shmem, stream)


def synchronize(target: str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output."""
    get_target(target).synchronize()
