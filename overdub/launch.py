"""Launching: ``od.cuda(kernel, *args, ...)`` -- the hot path.

A launch computes the argument-type key, looks the compiled kernel up once, checks its validity (a flag and
one version tag per module it read) and hands the arguments to the target's launcher. Everything else --
rewriting, typing, compiling -- happens only on a miss.
"""
from __future__ import annotations

import functools
import os

from . import compiler
from .context import Context

__all__ = ["cuda", "synchronize", "default_target", "get_target"]


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or a tuple of 1-3 positive ints, not {value!r}")
    return dims + (1,) * (3 - len(dims))


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


def get_target(name: str | None = None):
    """The target object for a name ("cpu" or "cuda"; None means :func:`default_target`)."""
    name = name or default_target()
    if name == "cpu":
        from .targets.cpu import TARGET
        return TARGET
    if name == "cuda":
        from .targets.cuda import TARGET
        return TARGET
    raise ValueError(f"unknown target {name!r}: use 'cpu' or 'cuda'")


def cuda(kernel, *args, threads=1, blocks=1, shmem: int = 0, stream=None, target: str | None = None,
         context: Context | None = None):
    """Launch ``kernel`` (a plain Python function) over ``blocks`` x ``threads`` in ``context``.

    The kernel and everything it calls are compiled for the argument types in the chain ``context`` ->
    its parents -> the target's base context, once; the compiled kernel is reused until something it
    consulted changes.
    """
    tgt = get_target(target)
    chain = (context or tgt.base).chain(tgt)
    argtypes = tuple(map(tgt.typeof, args))
    compiled = compiler.cached_kernel(kernel, argtypes, chain)
    compiler.count("launches")
    compiled.launcher.launch(args, _dims(blocks, "blocks"), _dims(threads, "threads"), shmem, stream)


def synchronize(target: str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output."""
    get_target(target).synchronize()
