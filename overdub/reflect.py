"""Introspection: what a kernel depends on, why things recompiled, and the code it became."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, cast

from . import compiler
from .call import KernelCall
from .context import Context
from .targets import CompileOptions
from .targets import cuda as cuda_target

__all__ = ["explain", "stats", "code_ptx", "code_llvm", "code_sass", "code_typed", "code_lto_ptx"]

stats: Callable[[], dict[str, int]] = compiler.stats


class _Library(Protocol):
    """numba-cuda's ``CUDACodeLibrary``, as the reflections read it (numba is reached from the targets only)."""

    def get_asm_str(self, cc: tuple[int, ...]) -> str: ...
    def get_llvm_str(self) -> str: ...
    def get_sass(self, cc: tuple[int, ...]) -> str: ...
    def get_lto_ptx(self, cc: tuple[int, ...]) -> str: ...


def explain(
    kernel: object, *args: object, target: str | None = None, context: Context | None = None, state: object = None
) -> list[str]:
    """The edges of the cached kernel for these arguments (or argument types): every dispatch answer,
    compiled callee and global its validity depends on, each with the world range it is valid for. Empty
    when no such kernel is cached."""
    return compiler.explain(KernelCall.of(kernel, args, target, context, state, typed=True).job)


def _cuda_compiled(
    kernel: object,
    args: tuple[object, ...],
    cc: Sequence[int],
    context: Context | None,
    state: object,
    options: dict[str, object],
) -> tuple[cuda_target.CUDALauncher, cuda_target.CUDATarget]:
    """The launcher of the kernel compiled on the CUDA target -- if it is not yet -- to be read, not launched."""
    target = cuda_target.target_for(tuple(cc)).configured(CompileOptions.of(**options))
    with cuda_target.reflecting():
        compiled = KernelCall.of(kernel, args, target, context, state, typed=True).compiled()
        return cast(cuda_target.CUDALauncher, compiled.launcher), target  # a CUDA kernel's launcher


def _cuda_library(
    kernel: object,
    args: tuple[object, ...],
    cc: Sequence[int],
    context: Context | None,
    state: object,
    options: dict[str, object],
) -> tuple[_Library, tuple[int, ...]]:
    launcher, target = _cuda_compiled(kernel, args, cc, context, state, options)
    return launcher.library, target.cc


def code_ptx(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int] = (9, 0),
    context: Context | None = None,
    state: object = None,
    **options: object,
) -> str:
    """The PTX of ``kernel`` for these arguments or numba types, for compute capability ``cc``, compiled with
    these compile options (``fastmath=True``, ``max_registers=32``, ...: :class:`CompileOptions`). Needs no GPU.
    In a context with state, ``state`` is the state's value or numba type (the kernel's first parameter)."""
    library, cc = _cuda_library(kernel, args_or_types, cc, context, state, options)
    with cuda_target.toolkit():
        return library.get_asm_str(cc=cc)


def code_llvm(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int] = (9, 0),
    context: Context | None = None,
    state: object = None,
    **options: object,
) -> str:
    """The optimised NVVM IR of ``kernel`` on the CUDA target. Needs no GPU."""
    library, _ = _cuda_library(kernel, args_or_types, cc, context, state, options)
    return library.get_llvm_str()


def code_sass(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int] | None = None,
    context: Context | None = None,
    state: object = None,
    **options: object,
) -> str:
    """The SASS of ``kernel`` (needs a GPU, or ptxas and nvdisasm; ``cc`` defaults to the device's)."""
    library, cc = _cuda_library(kernel, args_or_types, cc or cuda_target.device_cc(), context, state, options)
    cuda_target.make_current_if_gpu()  # a kernel compiled on another thread: linking its cubin asks the driver
    with cuda_target.toolkit():
        return library.get_sass(cc=cc)


def code_typed(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int] = (9, 0),
    context: Context | None = None,
    state: object = None,
    **options: object,
) -> str:
    """The typed numba IR of ``kernel`` on the CUDA target, annotated on its source lines (numba's
    ``inspect_types``; Julia's ``@code_typed``): the type of every variable after dispatch. Needs no GPU."""
    launcher, _ = _cuda_compiled(kernel, args_or_types, cc, context, state, options)
    return str(launcher.type_annotation)


def code_lto_ptx(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int] = (9, 0),
    context: Context | None = None,
    state: object = None,
    **options: object,
) -> str:
    """The PTX of ``kernel`` compiled with ``lto=True`` after link-time optimisation with everything it links
    (numba-cuda's ``inspect_lto_ptx``; needs nvJitLink)."""
    library, cc = _cuda_library(kernel, args_or_types, cc, context, state, dict(options, lto=True))
    with cuda_target.toolkit():
        return library.get_lto_ptx(cc=cc)
