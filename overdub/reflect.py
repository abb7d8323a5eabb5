"""Introspection: what a kernel depends on, and why things recompiled."""
from __future__ import annotations

from . import compiler
from .context import Context
from .launch import get_target

__all__ = ["explain", "stats"]

stats = compiler.stats


def explain(kernel, *args, target: str | None = None, context: Context | None = None) -> list[str]:
    """The edges of the cached kernel for these arguments (or argument types): every dispatch answer,
    compiled callee and global its validity depends on. Empty when no such kernel is cached."""
    tgt = get_target(target)
    argtypes = tuple(a if _is_type(a) else tgt.typeof(a) for a in args)
    return compiler.explain(kernel, argtypes, (context or tgt.base).chain(tgt.base))


def _is_type(value) -> bool:
    from numba.core import types
    return isinstance(value, types.Type)
