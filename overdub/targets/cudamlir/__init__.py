"""The cuda-mlir target: the CUDA target with numba-cuda-mlir as its compiler.

numba-cuda, which the CUDA target compiles with, is in maintenance mode; numba-cuda-mlir is its successor from
the same team: its own copy of numba-cuda's front end (typing, the kernel language) and an MLIR code
generator, with no numba dependency. This target compiles overdub kernels with it -- generic functions
dispatched while it types a kernel, with their edges recorded; contexts, overdubs and hooks; the kernel
language -- and is the CUDA target in all else: the same devices, memory, streams and own context (``od.CUDA``:
what a library adds there applies to both compilers).

Installed with the ``mlir`` extra (``pip install 'overdub[mlir]'``); without it, asking for the target raises
an ImportError saying so. ``od.cuda(..., target="cuda-mlir")``, ``od.code_ptx(..., target="cuda-mlir")``, or
``OVERDUB_CUDA_COMPILER=numba-cuda-mlir`` to make it what ``target="cuda"`` (and the default target on a GPU)
means.

The package, one concept a module: this module the target, :mod:`.translate` numba's types and numba-cuda-mlir's,
:mod:`.calls` what numba-cuda-mlir types and lowers of overdub's rewrite, :mod:`.launcher` a compiled kernel's
launch. docs/cuda-mlir.md says what it does not compile yet, and why.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import threading
from collections.abc import Callable, Iterator
from typing import Any

try:
    import numba_cuda_mlir  # noqa: F401
except ImportError as exc:  # the extra not installed
    raise ImportError(
        "target='cuda-mlir' compiles with numba-cuda-mlir, which is not installed here: "
        "pip install 'overdub[mlir]' (numba-cuda-mlir[cu13], Python 3.11 or newer)"
    ) from exc

import numba_cuda_mlir.tools as mlir_tools
import numpy as np
from numba.core import types as nt
from numba_cuda_mlir.descriptor import mlir_target
from numba_cuda_mlir.numba_cuda.typing.templates import signature as mlir_signature

from ... import bridge, operators
from ...intrinsics import cuprintln, unsafe_load, unsafe_store
from ...roots import TargetRoot
from ...runtime import runtime
from ...types import keep_as_is
from ..cuda import CUDATarget, device_cc
from ..gpu import gpu_usable
from ..interface import GraphCapture
from ..options import CompileOptions
from .calls import MLIRBuiltin, MLIRMethod, MLIRSelfCall, callee_name, counterpart
from .launcher import MLIRCode, MLIRLauncher
from .translate import Untranslatable, mlir_cuda, signature_to_mlir, signature_to_numba, to_mlir

__all__ = ["CUDAMLIRTarget", "current_target", "target_for", "VERSION"]

VERSION = importlib.metadata.version("numba-cuda-mlir")

# numba-cuda-mlir compiles one function at a time (its dispatchers' state, the no-GPU compute capability);
# taken after the compile lock, never before it
_lock = threading.RLock()


@contextlib.contextmanager
def _compiling_for(cc: tuple[int | str, ...]) -> Iterator[None]:
    """numba-cuda-mlir internals: its target resolution asks the driver for the host's compute capability even
    where the architecture is given (``tools.resolve_gpu_target``), which fails on a machine with no GPU. There
    the host is taken to be the architecture compiled for (the cached answer it reads first); with a GPU nothing
    is changed. tests/test_cuda_mlir.py breaks loudly if numba-cuda-mlir moves the name."""
    if gpu_usable():
        yield
        return
    saved = mlir_tools._cached_cc
    mlir_tools._cached_cc = tuple(int(part) for part in cc[:2])
    try:
        yield
    finally:
        mlir_tools._cached_cc = saved


def _join_pipeline() -> None:
    """numba-cuda-mlir internals: its front end's own IR modules and rewrite registry run overdub's operator
    passes (a context's overdub of ``+`` reaches its kernels); its ``literal_unroll`` stays itself in
    compiled code, as numba's does."""
    from numba_cuda_mlir.numba_cuda.core import errors, ir, rewrites
    from numba_cuda_mlir.numba_cuda.misc.special import literal_unroll

    operators.join_pipeline(rewrites, ir, errors)
    keep_as_is(literal_unroll)


_join_pipeline()


class CUDAMLIRTarget(CUDATarget):
    """The CUDA target compiling with numba-cuda-mlir."""

    name = "cuda-mlir"
    # compile_lock: numba's global compiler lock, as the CUDA target's -- its typing of a call compiles
    # numba-cuda's @overloads under that lock, so taking it first keeps one order of locks across threads

    def __init__(
        self, cc: tuple[int | str, ...], options: CompileOptions = CompileOptions(), root: TargetRoot | None = None
    ) -> None:
        self.cc, self.options = tuple(cc), options
        arch = "sm_" + "".join(map(str, self.cc))
        self.label = self._label(f"cuda-mlir ({arch})")
        if root is None:
            self.root = TargetRoot(f"cuda-mlir-{arch}", self)
            self.root.forward(cuprintln, print)  # numba-cuda-mlir prints with its own lowering of print
            self.root.forward(unsafe_load, _load)  # pointers: numba-cuda-mlir's own CPointer indexing
            self.root.forward(unsafe_store, _store)
        else:
            self.root = root.configured_for(self)

    def _with_options(self, options: CompileOptions) -> CUDAMLIRTarget:
        return CUDAMLIRTarget(self.cc, options, self.root)

    def __reduce__(self) -> tuple[Callable[..., CUDAMLIRTarget], tuple[object, ...]]:
        return _configured, (self.cc, self.options)

    @property
    def cache_tag(self) -> str:
        return f"{self.label}:numba-cuda-mlir {VERSION}:{self.options!r}"

    def _jit_options(self, device: bool) -> dict[str, object]:
        """numba-cuda-mlir's ``jit`` options for these compile options (it takes numba-cuda's names)."""
        options = self.options
        jit: dict[str, object] = {"device": device, "chip": "sm_" + "".join(map(str, self.cc))}
        if options.debug or not options.opt:  # debug: unoptimised, as on the CUDA target
            jit["opt"] = False
        for name in ("debug", "lineinfo", "fastmath", "lto"):
            if getattr(options, name):
                jit[name] = True
        for name in ("max_registers", "launch_bounds", "shared_memory_carveout"):
            if getattr(options, name) is not None:
                jit[name] = getattr(options, name)
        if options.link and not device:
            jit["link"] = list(options.link)
        return jit

    # -- typing: overdub decides calls on numba's types; numba-cuda-mlir compiles what was decided ---------
    def delegate(
        self, typing_context: Any, callee: object, args: tuple[Any, ...], kws: dict[str, Any]
    ) -> tuple[Any, object] | tuple[None, None]:
        """A call of what the kernel language implements: typed by numba-cuda (overdub's view) and by
        numba-cuda-mlir (its implementation of the same name, which lowering calls)."""
        if callee is round and len(args) == 1 and not kws and isinstance(args[0], nt.Float):
            # numba-cuda-mlir 0.6.0 rounds halves away from zero (round(2.5) == 3); Python and numba-cuda to even
            sig, method, _ = self.compile_method(_round_half_even, typing_context, args, kws)
            return sig, method
        sig, _ = bridge.delegate(typing_context, callee, args, kws)
        if sig is None:
            return None, None
        theirs = counterpart(callee)
        context = mlir_target.typing_context
        try:
            margs = tuple(to_mlir(a) for a in args)
            mkws = {k: to_mlir(v) for k, v in kws.items()}
            msig = context.resolve_function_type(context.resolve_value_type(theirs), margs, mkws)
        except Untranslatable as exc:
            raise TypeError(f"{_name(callee)}: the cuda-mlir target cannot compile this call: {exc}") from None
        except ValueError:  # numba-cuda-mlir has no type for it at all
            msig = None
        if msig is None:
            raise TypeError(
                f"{_name(callee)}({', '.join(map(str, args))}) compiles with numba-cuda but numba-cuda-mlir "
                f"{VERSION} has no implementation of it: launch on target='cuda'"
            )
        try:
            sig = signature_to_numba(msig)
        except Untranslatable:
            pass  # numba-cuda's view stands for overdub's side
        return sig, MLIRBuiltin(theirs, msig)

    def inlined_overload(
        self, typing_context: Any, callee: object, args: tuple[Any, ...], kws: dict[str, Any]
    ) -> Callable[..., Any] | None:
        """None where numba-cuda-mlir has its own object of the name (``carray``): its implementation, not
        numba-cuda's inlined one, whose body calls numba-cuda's intrinsics."""
        if counterpart(callee) is not callee:
            return None
        return super().inlined_overload(typing_context, callee, args, kws)

    def compile_method(  # type: ignore[override]  # the CUDA target's with this compiler's code
        self, func: Callable[..., object], typing_context: object, argtypes: tuple[Any, ...], kws: dict[str, Any]
    ) -> tuple[Any, MLIRMethod, object]:
        folded, pysig = bridge.fold_call(func, argtypes, kws)
        try:
            margs = tuple(to_mlir(t) for t in folded)
        except Untranslatable as exc:
            raise TypeError(f"{_name(func)}: the cuda-mlir target cannot compile it: {exc}") from None
        dispatcher = mlir_cuda.jit(**self._jit_options(device=True))(func)
        with _lock, _compiling_for(self.cc):
            cres = dispatcher._compile_as_device_callee(margs, abi_name=callee_name(dispatcher, margs))
        msig = cres.signature
        sig = signature_to_numba(msig).replace(pysig=pysig)
        return sig, MLIRMethod(dispatcher, msig), dispatcher

    def call_with_state(self, sig: Any, impl_key: object) -> tuple[Any, object, object]:  # type: ignore[override]  # the CUDA target's with this compiler's code
        raise TypeError(
            "the cuda-mlir target does not compile launches passing state (od.cuda(..., state=...)) yet: "
            "numba-cuda-mlir's lowering has no call with a hidden first argument (docs/cuda-mlir.md)"
        )

    def self_call_signature(
        self, typing_context: Any, func: Callable[..., Any], typed_args: tuple[Any, ...], argtypes: tuple[Any, ...]
    ) -> Any:
        """numba's rule for a function calling itself, in numba-cuda-mlir's typing, where the method is being
        typed: the return type its other returns give so far."""
        try:
            margs = tuple(to_mlir(t) for t in typed_args)
        except Untranslatable:
            return None
        return_type = bridge.partial_return_type(mlir_target.typing_context, func, margs)
        if return_type is None:
            return None
        return signature_to_numba(mlir_signature(return_type, *margs))

    def self_call(self, sig: Any, state: Any) -> tuple[object, object]:
        if state is not None:
            raise TypeError("the cuda-mlir target does not compile launches passing state yet (docs/cuda-mlir.md)")
        return MLIRSelfCall(signature_to_mlir(sig)), None

    def compile_kernel(self, func: Callable[..., object], argtypes: tuple[object, ...]) -> MLIRCode:  # type: ignore[override]  # the CUDA target's with this compiler's code
        try:
            margs = tuple(to_mlir(t) for t in argtypes)
        except Untranslatable as exc:
            raise TypeError(f"{_name(func)}: the cuda-mlir target cannot compile it: {exc}") from None
        from numba_cuda_mlir.numba_cuda import types as mt

        dispatcher = mlir_cuda.jit(**self._jit_options(device=False))(func)
        with _lock, _compiling_for(self.cc):
            cres = dispatcher.compile(mt.void(*margs))
        return MLIRCode(dispatcher, cres, tuple(argtypes))

    def link(self, code: MLIRCode) -> MLIRLauncher:  # type: ignore[override]
        return MLIRLauncher(code)

    # the disk cache stores nothing of this target's yet: its entries are keyed by compiler (cache_tag)
    def serialized(self, code: Any) -> object | None:  # type: ignore[override]  # the CUDA target's with this compiler's code
        return None

    def deserialized(self, stored: Any, argtypes: tuple[object, ...]) -> Any | None:
        return None

    def code(self, code: MLIRCode, kind: str) -> str:  # type: ignore[override]
        if kind == "ptx":
            with _lock, _compiling_for(self.cc):
                return str(code.cres.ptx)
        if kind == "mlir":
            return str(code.cres.mlir_module)
        if kind == "typed":
            return str(getattr(code.cres, "type_annotation", ""))
        raise ValueError(f"the {self.label} target has no {kind} code to show: it has ptx, mlir and typed")

    def compile_device_function(self, func: Callable[..., object], argtypes: tuple[object, ...]) -> Any:
        raise ValueError(f"the {self.label} target compiles no device function on its own yet")

    def for_reflection(self, cc: tuple[int | str, ...] | None, device: int | None) -> CUDAMLIRTarget:
        if cc is not None and device is not None:
            raise TypeError(f"give cc= ({tuple(cc)}) or device= ({device}), not both: a device has one architecture")
        if cc is None:
            cc = device_cc(device, "od.code_*")
        return target_for(tuple(cc)).configured(self.options)

    def for_current_device(self) -> CUDAMLIRTarget:
        from ..cuda import _reflecting

        if _reflecting.get():
            return self
        cc = device_cc()
        return self if cc == self.cc else target_for(cc).configured(self.options)

    def graph_capture(self) -> GraphCapture | None:  # type: ignore[override]
        return None  # od.graph keeps this target's launches and replays them one by one


def _round_half_even(x: Any) -> Any:
    """``round(x)`` of a float on this target: to the nearest integer, halves to even (Python's rule)."""
    return np.int64(mlir_cuda.libdevice.rint(x))  # a float32 widened exactly first (compiled as it is)


def _load(ptr: Any, i: int = 0) -> Any:
    """``od.unsafe_load`` on this target: numba-cuda-mlir indexes a pointer itself."""
    return ptr[i]


def _store(ptr: Any, value: Any, i: int = 0) -> None:
    """``od.unsafe_store`` on this target."""
    ptr[i] = value


def _name(func: object) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func))


bridge.name_typing_context(type(mlir_target.typing_context), "CUDA (numba-cuda-mlir)")


def current_target() -> CUDAMLIRTarget:
    """The cuda-mlir target of the architecture of the device current on the calling thread."""
    return target_for(device_cc())


@functools.cache
def target_for(cc: tuple[int | str, ...]) -> CUDAMLIRTarget:
    return CUDAMLIRTarget(cc)


runtime.register_cache(f"{__name__}.target_for", target_for, kept="a target is a definition: kernels are keyed by it")


def _configured(cc: tuple[int | str, ...], options: CompileOptions) -> CUDAMLIRTarget:
    return target_for(cc).configured(options)
