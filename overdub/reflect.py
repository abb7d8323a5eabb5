"""Introspection: what a kernel depends on, why things recompiled, and the code it became."""

from __future__ import annotations

from . import compiler
from .call import KernelCall
from .context import Context
from .targets import CompileOptions
from .targets import cuda as cuda_target

__all__ = ["explain", "stats", "code_ptx", "code_llvm", "code_sass", "code_typed", "code_lto_ptx"]

stats = compiler.stats


def explain(kernel, *args, target: str | None = None, context: Context | None = None, state=None) -> list[str]:
    """The edges of the cached kernel for these arguments (or argument types): every dispatch answer,
    compiled callee and global its validity depends on, each with the world range it is valid for. Empty
    when no such kernel is cached."""
    return compiler.explain(KernelCall.of(kernel, args, target, context, state, typed=True).job)


def _cuda_compiled(kernel, args, cc, context, state, options: dict):
    """The compiled kernel on the CUDA target, compiled -- if it is not yet -- to be read, not launched."""
    target = cuda_target.target_for(tuple(cc)).configured(CompileOptions.of(**options))
    with cuda_target.reflecting():
        return KernelCall.of(kernel, args, target, context, state, typed=True).compiled(), target


def _cuda_library(kernel, args, cc, context, state, options: dict):
    compiled, target = _cuda_compiled(kernel, args, cc, context, state, options)
    return compiled.launcher.library, target.cc


def code_ptx(kernel, *args_or_types, cc=(9, 0), context: Context | None = None, state=None, **options) -> str:
    """The PTX of ``kernel`` for these arguments or numba types, for compute capability ``cc``, compiled with
    these compile options (``fastmath=True``, ``max_registers=32``, ...: :class:`CompileOptions`). Needs no GPU.
    In a context with state, ``state`` is the state's value or numba type (the kernel's first parameter)."""
    library, cc = _cuda_library(kernel, args_or_types, cc, context, state, options)
    return library.get_asm_str(cc=cc)


def code_llvm(kernel, *args_or_types, cc=(9, 0), context: Context | None = None, state=None, **options) -> str:
    """The optimised NVVM IR of ``kernel`` on the CUDA target. Needs no GPU."""
    library, _ = _cuda_library(kernel, args_or_types, cc, context, state, options)
    return library.get_llvm_str()


def code_sass(kernel, *args_or_types, cc=None, context: Context | None = None, state=None, **options) -> str:
    """The SASS of ``kernel`` (needs a GPU, or ptxas and nvdisasm; ``cc`` defaults to the device's)."""
    library, cc = _cuda_library(kernel, args_or_types, cc or cuda_target.device_cc(), context, state, options)
    return library.get_sass(cc=cc)


def code_typed(kernel, *args_or_types, cc=(9, 0), context: Context | None = None, state=None, **options) -> str:
    """The typed numba IR of ``kernel`` on the CUDA target, annotated on its source lines (numba's
    ``inspect_types``; Julia's ``@code_typed``): the type of every variable after dispatch. Needs no GPU."""
    compiled, _ = _cuda_compiled(kernel, args_or_types, cc, context, state, options)
    return str(compiled.launcher.type_annotation)


def code_lto_ptx(kernel, *args_or_types, cc=(9, 0), context: Context | None = None, state=None, **options) -> str:
    """The PTX of ``kernel`` compiled with ``lto=True`` after link-time optimisation with everything it links
    (numba-cuda's ``inspect_lto_ptx``; needs nvJitLink)."""
    library, cc = _cuda_library(kernel, args_or_types, cc, context, state, dict(options, lto=True))
    return library.get_lto_ptx(cc=cc)
