"""Introspection: what a kernel depends on, why things recompiled, and the code it became."""
from __future__ import annotations

from numba.core import types

from . import compiler
from .context import Context
from .launch import get_target

__all__ = ["explain", "stats", "code_ptx", "code_llvm", "code_sass"]

stats = compiler.stats


def _argtypes(target, args) -> tuple:
    return tuple(a if isinstance(a, types.Type) else target.typeof(a) for a in args)


def explain(kernel, *args, target: str | None = None, context: Context | None = None) -> list[str]:
    """The edges of the cached kernel for these arguments (or argument types): every dispatch answer,
    compiled callee and global its validity depends on. Empty when no such kernel is cached."""
    tgt = get_target(target)
    return compiler.explain(kernel, _argtypes(tgt, args), (context or tgt.base).chain(tgt))


def _cuda_library(kernel, args, cc, context):
    from .targets.cuda import target_for
    tgt = target_for(tuple(cc))
    compiled = compiler.cached_kernel(kernel, _argtypes(tgt, args), (context or tgt.base).chain(tgt))
    return compiled.launcher.library, tgt.cc


def code_ptx(kernel, *args_or_types, cc=(9, 0), context: Context | None = None) -> str:
    """The PTX of ``kernel`` for these arguments or numba types, for compute capability ``cc``. Needs no GPU."""
    library, cc = _cuda_library(kernel, args_or_types, cc, context)
    return library.get_asm_str(cc=cc)


def code_llvm(kernel, *args_or_types, cc=(9, 0), context: Context | None = None) -> str:
    """The optimised NVVM IR of ``kernel`` on the CUDA target. Needs no GPU."""
    library, _ = _cuda_library(kernel, args_or_types, cc, context)
    return library.get_llvm_str()


def code_sass(kernel, *args_or_types, cc=None, context: Context | None = None) -> str:
    """The SASS of ``kernel`` (needs a GPU, or ptxas and nvdisasm; ``cc`` defaults to the device's)."""
    from .targets.cuda import TARGET
    library, cc = _cuda_library(kernel, args_or_types, cc or TARGET.cc, context)
    return library.get_sass(cc=cc)
