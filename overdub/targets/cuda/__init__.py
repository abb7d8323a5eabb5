"""The CUDA target: numba-cuda lowers the rewritten kernel to NVVM IR, libNVVM to PTX, the driver loads it.

Callees are compiled with ``compile_cuda`` for an explicit compute capability and registered with the CUDA
target context directly, which is what lets kernels calling generic device methods compile to PTX on a
machine with no GPU (numba's own device functions ask the current device for its compute capability). A
registration lives exactly as long as the method instance that made it.

Host (numpy) arrays are rejected with a message saying what to pass instead: copying silently in and out
would hide two transfers in every launch.

The package, one concept a module: this module the target (compiling, registering callees, the compiled
kernel's launcher made), :mod:`.driver` the driver and host threads' contexts, :mod:`.launcher` a compiled
kernel's launch, :mod:`.abi` the parameter ABI (how each argument kind is passed: its slots, its native spec,
a struct value's bytes), :mod:`.graph` ``od.graph``'s capture and replay, :mod:`.arraylayout` where cupy keeps
an array's fields for ``_fastlaunch.c`` to read in place.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

import numba
import numpy as np
from numba.core import types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.typing.templates import Signature, signature

if TYPE_CHECKING:
    # mypy reads numba.cuda as numba's own, older copy of the package, which numba-cuda replaces at run time
    # (its .pth redirector): what this module takes of numba-cuda is Any to it
    numba_cuda_dispatcher: Any
    ArgHint: Any
    numba_cuda_literal_unroll: Any
    CUDACodeLibrary: Any
    compile_cuda: Any
    kernel_fixup: Any
    nvvm: Any
    cuda_target: Any
    Purpose: Any
    cuda_typeof: Callable[[object, Any], types.Type]  # (value, Purpose.argument)
else:
    from numba.cuda import dispatcher as numba_cuda_dispatcher
    from numba.cuda.args import ArgHint
    from numba.cuda.codegen import CUDACodeLibrary
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.cudadrv import nvvm
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.misc.special import literal_unroll as numba_cuda_literal_unroll
    from numba.cuda.typing.typeof import Purpose
    from numba.cuda.typing.typeof import typeof as cuda_typeof

from ... import arguments, bridge
from ... import types as overdub_types
from ...arguments import HostMemoryError
from ...bridge.hidden import HiddenArgumentCall
from ...bridge.pointers import forwarded_views
from ...bridge.recursion import SelfCall
from ...context import Context, when_imported
from ...intrinsics import cuprintln
from ...roots import TargetRoot
from ...runtime import runtime
from ..gpu import DEFAULT_CC, gpu_usable
from ..interface import Target
from ..options import CompileOptions, Configurable
from ..registry import CUDA
from . import printing as _printing  # noqa: F401  (registers how CUDA code prints)
from .copies import copied_to_device, copy_back
from .driver import (
    CompileFork,
    become_compile_fork,
    check_same_device,
    check_stream,
    checked,
    compile_fork,
    context_of_stream,
    device_count,
    driver,
    make_current,
    make_current_if_gpu,
    pushed,
    several_devices,
    toolkit,
)
from .graph import Capture
from .launcher import CUDALauncher

__all__ = [  # the target, and what other modules reach through this package
    "CUDATarget",
    "CUDALauncher",
    "HostMemoryError",
    "Registration",
    "target_for",
    "current_target",
    "CUDACode",
    "device_cc",
    "reflecting",
    "copied_to_device",
    "copy_back",
    "driver",
    "make_current_if_gpu",
    "toolkit",
]

# --- the target -----------------------------------------------------------------------------------------


def _numba_typeof(value: object) -> types.Type:
    return cuda_typeof(value, Purpose.argument)


def _refuse_host_memory(value: object, kind: arguments.ArgumentKind[Any, Any]) -> None:
    raise HostMemoryError(
        f"a {kind.name.replace('_', ' ')} ({value!r:.60}) lives in host memory: pass a cupy array, a numba device "
        f"array (numba.cuda.to_device), any __cuda_array_interface__ object, or od.pointer of one to a CUDA "
        f"kernel, or launch through od.jit, which copies host arrays and records as numba-cuda does"
    )


class Registration:
    """A method instance's code, registered with the CUDA target context under ``impl_key`` for as long as
    this object lives (the method instance holds it)."""

    __slots__ = ("cres", "__weakref__")

    def __init__(self, cres: Any, impl_key: tuple[str, str]) -> None:
        self.cres = cres
        cres.target_context.insert_user_function(impl_key, cres.fndesc, [cres.library])
        weakref.finalize(self, cres.target_context.remove_user_function, impl_key)


_reflecting = contextvars.ContextVar("overdub_reflecting", default=False)


@contextlib.contextmanager
def reflecting() -> Iterator[None]:
    """While kernels are compiled to be read (``od.code_ptx`` and the other reflections), not launched: the
    disk cache entries they make hold PTX, not a cubin linked for the device."""
    token = _reflecting.set(True)
    try:
        yield
    finally:
        _reflecting.reset(token)


class _CompileDevice:
    """What numba-cuda's dispatcher reads of "the current device" while compiling: its compute capability."""

    def __init__(self, cc: tuple[int | str, ...]) -> None:
        self.compute_capability = cc


@contextlib.contextmanager
def _compiling_for(cc: tuple[int | str, ...]) -> Iterator[None]:
    """numba internals, the one place overdub patches them: numba-cuda compiles what it implements with
    ``@overload``, ``@overload_method`` and device dispatchers by a dispatcher that asks the driver for the
    current device's compute capability (``numba.cuda.dispatcher.get_current_device``), which fails on a
    machine with no GPU. While overdub compiles for ``cc`` there, that question is answered with ``cc``.
    With a GPU nothing is patched. tests/test_cuda_codegen.py breaks loudly if numba-cuda moves the name."""
    if gpu_usable():
        yield
        return
    original = numba_cuda_dispatcher.get_current_device
    numba_cuda_dispatcher.get_current_device = lambda: _CompileDevice(cc)
    try:
        yield
    finally:
        numba_cuda_dispatcher.get_current_device = original


@when_imported("ml_dtypes")
def _bfloat16_elements(ml_dtypes: Any) -> None:
    """Arrays of ml_dtypes' ``bfloat16`` (a cupy or numpy array of it) hold numba-cuda's bfloat16, as
    numba-cuda types them."""
    from numba.cuda.np import numpy_support  # type: ignore[import-not-found]  # numba-cuda's (mypy reads numba's)

    dtype = np.dtype(ml_dtypes.bfloat16)
    overdub_types.target_element_types[dtype] = numpy_support.from_dtype(dtype)


# numba-cuda internals: array reshapes lower to calls of C functions that numba-cuda's own kernels link from a
# CUDA source file shipped with it, when the kernel's code names them (dispatcher.py, reshape_funcs)
_RESHAPE_FUNCTIONS = ("nocopy_empty_reshape", "numba_attempt_nocopy_reshape")
_RESHAPE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(numba_cuda_dispatcher.__file__)), "reshape_funcs.cu")


def _helper_sources(library: Any) -> tuple[object, ...]:
    """The sources of numba-cuda's helper functions the kernel's code calls, to link with it: its reshape
    helpers, and its device NRT (the allocator and reference counts of arrays a kernel makes: ``a.copy()``,
    ``np.empty``, reductions), which numba-cuda's code calls where ``config.CUDA_ENABLE_NRT`` is set."""
    code = library.get_llvm_str()
    sources: list[object] = [_RESHAPE_SOURCE] if any(name in code for name in _RESHAPE_FUNCTIONS) else []
    if _CALLS_NRT.search(code):
        from numba.cuda.memory_management.nrt import NRT_LIBRARY  # type: ignore[import-not-found]

        sources.append(NRT_LIBRARY)
    return tuple(sources)


# numba-cuda internals: a call of one of the device NRT's entry points in the kernel's NVVM IR (where NRT is
# enabled, the IR declares NRT_incref and NRT_decref whether or not it calls them)
_CALLS_NRT = re.compile(r"\bcall [^\n]*@\"?NRT_\w+")


@dataclasses.dataclass(frozen=True)
class CUDACode:
    """A kernel's code on the CUDA target, as ``compile_kernel`` or the disk cache makes it: numba-cuda's code
    library (NVVM IR, then PTX and cubin as they are asked for) and its typed IR."""

    library: Any  # numba-cuda's CUDACodeLibrary
    argtypes: tuple[object, ...]
    call_helper: Any  # debug kernels: what the error codes threads record mean (None: not checked)
    type_annotation: object  # the typed IR, annotated on the source (inspect_types)


class CUDATarget(Configurable, Target):
    name = "cuda"
    base: Context = CUDA
    device_memory = True
    compile_lock: AbstractContextManager[Any] = global_compiler_lock

    def __init__(
        self, cc: tuple[int | str, ...], options: CompileOptions = CompileOptions(), root: TargetRoot | None = None
    ) -> None:
        self.cc, self.options = tuple(cc), options
        arch = "sm_" + "".join(map(str, self.cc))  # sm_90; sm_90a for (9, 0, "a"): an architecture of its own
        self.label = self._label(f"cuda ({arch})")
        if root is None:
            self.root = TargetRoot(f"cuda-{arch}", self)
            self.root.forward(print, cuprintln)
            self.root.replace(numba.literal_unroll, numba_cuda_literal_unroll)  # the one numba-cuda unrolls by
            for callee, view in forwarded_views():
                self.root.forward(callee, view)
        else:
            self.root = root.configured_for(self)

    def _with_options(self, options: CompileOptions) -> CUDATarget:
        return CUDATarget(self.cc, options, self.root)

    def __reduce__(self) -> tuple[Callable[..., CUDATarget], tuple[object, ...]]:
        """Pickled as what makes it in another process (``od.precompile``'s workers): the CUDA target of this
        compute capability configured with these options."""
        return _configured, (self.cc, self.options)

    def _compile(
        self, func: Callable[..., object], return_type: types.Type | None, argtypes: tuple[object, ...]
    ) -> Any:
        """numba-cuda's compile of ``func`` for this compute capability and these options (no GPU needed)."""
        options = self.options
        # debug: NVVM's -g, which numba-cuda warns crashes with optimisation on
        nvvm_options: dict[str, object] = {
            "opt": 3 if options.opt and not options.debug else 0,
            "fastmath": options.fastmath,
        }
        if options.debug:
            nvvm_options["g"] = None
        make_current_if_gpu()
        with _compiling_for(self.cc):
            return compile_cuda(
                func,
                return_type,
                argtypes,
                cc=self.cc,
                debug=options.debug,
                lineinfo=options.lineinfo,
                fastmath=options.fastmath,
                nvvm_options=nvvm_options,
                max_registers=options.max_registers,
                lto=options.lto,
            )

    @property
    def cache_tag(self) -> str:
        """What the PTX depends on besides the kernel: the compute capability and the compile options."""
        return f"{self.label}:{self.options!r}"

    def argument(self, value: object) -> arguments.Argument:
        if isinstance(value, ArgHint):  # cuda.In, Out, InOut: host memory the drop-in copies as they say
            raise HostMemoryError(
                f"cuda.{type(value).__name__}(...) wraps a host array: launch through od.jit, which copies it as "
                f"numba-cuda does, or pass a device array"
            )
        described = arguments.describe(value, _numba_typeof, "host", _refuse_host_memory)
        if described.kind is not None and several_devices():
            check_same_device(value)
        return described

    def compile_method(
        self,
        func: Callable[..., object],
        typing_context: object,
        argtypes: tuple[types.Type, ...],
        kws: dict[str, types.Type],
    ) -> tuple[Signature, tuple[str, str], Registration]:
        folded, pysig = bridge.fold_call(func, argtypes, kws)
        cres = self._compile(func, None, folded)
        bridge.note_attribute_templates(cres)
        impl_key = ("overdub", cres.fndesc.mangled_name)
        sig = signature(cres.signature.return_type, *folded)  # type: ignore[no-untyped-call]  # numba's is unannotated
        sig = sig.replace(pysig=pysig)
        return sig, impl_key, Registration(cres, impl_key)

    def call_with_state(self, sig: Signature, impl_key: object) -> tuple[Signature, object, HiddenArgumentCall]:
        from numba.cuda.descriptor import cuda_target

        calls = HiddenArgumentCall(cuda_target.target_context, sig, impl_key)  # type: ignore[no-untyped-call]  # the bridge's is unannotated
        return calls.sig, calls.impl_key, calls

    def self_call(self, sig: Signature, state: Any) -> tuple[object, object]:
        from numba.cuda.descriptor import cuda_target

        calls = SelfCall(cuda_target.target_context, sig, state)
        return calls.impl_key, calls

    def compile_kernel(self, func: Callable[..., object], argtypes: tuple[object, ...]) -> CUDACode:
        cres = self._kernel_code(func, argtypes)
        helper = cres.call_helper if self.options.debug else None
        return CUDACode(cres.library, tuple(argtypes), helper, cres.type_annotation)

    def link(self, code: CUDACode) -> CUDALauncher:
        carveout = self.options.shared_memory_carveout
        return CUDALauncher(code.library, code.argtypes, code.call_helper, code.type_annotation, carveout)

    def _kernel_code(self, func: Callable[..., object], argtypes: tuple[object, ...]) -> Any:
        """numba's compile result for a kernel, its library finished for loading: PTX (``get_asm_str``), LLVM IR
        (``get_llvm_str``), SASS, LTO PTX."""
        cres = self._compile(func, types.void, tuple(argtypes))
        bridge.note_attribute_templates(cres)
        library = cres.library
        entry = library.get_function(cres.fndesc.llvm_func_name)
        library._entry_name = cres.fndesc.llvm_func_name
        kernel_fixup(entry, debug=self.options.debug)
        nvvm.set_launch_bounds(entry, self.options.launch_bounds)
        for path in self.options.link + _helper_sources(library):
            library.add_linking_file(path)
        if library.use_cooperative:  # grid sync is implemented in the device runtime library
            library.needs_cudadevrt = True
        return cres

    # -- the disk cache's view of a compiled kernel: numba-cuda's own serialisation of a code library (what
    # its cache=True stores: CUDACodeLibrary._reduce_states / _rebuild), with the code its use needs made
    # now: for a launch on a GPU of this target's compute capability, the cubin the launch loads; for a
    # reflection (od.code_ptx, ...) or where no such GPU is, the PTX for this compute capability -------------
    def serialized(self, code: CUDACode) -> dict[str, object] | None:
        """The kernel library's NVVM IR, PTX or cubin and its typed IR as text, or None where it cannot be
        serialised (it links files or refers to global device arrays) or needs this process (a debug kernel's
        error codes).

        The cubin is linked from the PTX for the device's own architecture -- numba-cuda's ``get_cubin()``
        compiles for the arch-specific target, sm_90a on a 9.0 device -- so the PTX for ``self.cc`` (sm_90)
        would be a second NVVM run that no launch loads; ``od.code_ptx`` makes it when asked."""
        library = code.library
        if self.options.debug:
            return None
        if self._launches_load_cubins():
            fork = compile_fork()
            if fork is None:
                make_current()  # linking may ask the driver
                library.get_cubin()
            else:  # a forked worker: the key its parent's launches look the cubin up by, asked there
                library.get_cubin(cc=fork.link_cc)
        else:
            library.get_asm_str(cc=self.cc)
        try:
            states = library._reduce_states()
        except Exception:  # numba-cuda refuses (pickle.PicklingError, RuntimeError): not cacheable
            return None
        return {"library": states, "type_annotation": str(code.type_annotation)}

    def deserialized(self, stored: dict[str, Any], argtypes: tuple[object, ...]) -> CUDACode | None:
        """The loaded kernel's code, or None -- a miss -- for a launch here from an entry that holds no cubin
        (a reflection, or a process without this GPU, stored it): compiling again stores the cubin, so later
        processes do not link one at every start."""
        if self._launches_load_cubins() and not stored["library"].get("cubin_cache"):
            return None
        codegen = cuda_target.target_context.codegen()
        library = CUDACodeLibrary._rebuild(**dict(stored["library"], codegen=codegen))
        return CUDACode(library, tuple(argtypes), None, stored["type_annotation"])

    # -- reflection: od.code_ptx and the others read a kernel's code, compiled for the architecture asked ---
    def code(self, code: CUDACode, kind: str) -> str:
        library = code.library
        if kind == "llvm":
            return str(library.get_llvm_str())
        if kind == "typed":
            return str(code.type_annotation)
        if kind not in ("ptx", "sass", "lto_ptx"):
            return super().code(code, kind)
        if kind == "sass":
            make_current_if_gpu()  # a kernel compiled on another thread: linking its cubin asks the driver
        with toolkit():
            read = {"ptx": library.get_asm_str, "sass": library.get_sass, "lto_ptx": library.get_lto_ptx}[kind]
            return str(read(cc=self.cc))

    def compile_device_function(self, func: Callable[..., object], argtypes: tuple[object, ...]) -> Registration:
        types_ = tuple(cast("types.Type", t) for t in argtypes)
        return self.compile_method(func, cuda_target.typing_context, types_, {})[2]

    def device_code(self, compiled: Registration, kind: str) -> str:
        library = compiled.cres.library
        if kind == "llvm":
            return str(library.get_llvm_str())
        if kind == "ptx":
            with toolkit():
                return str(library.get_asm_str(cc=self.cc))
        if kind == "sass":  # numba-cuda's error and message: a device function alone links into no cubin
            raise RuntimeError("Cannot inspect SASS of a device function: inspect the kernel calling it")
        return super().device_code(compiled, kind)

    def for_reflection(self, cc: tuple[int | str, ...] | None, device: int | None) -> CUDATarget:
        """The target for compute capability ``cc``, else for ``device``'s, else for the current device's
        (sm_90 with no GPU), with these options."""
        if cc is not None and device is not None:
            raise TypeError(f"give cc= ({tuple(cc)}) or device= ({device}), not both: a device has one architecture")
        if cc is None:
            cc = device_cc(device, "od.code_*")
        return target_for(tuple(cc)).configured(self.options)

    def reflecting(self) -> AbstractContextManager[None]:
        return reflecting()

    # -- launches, memory --------------------------------------------------------------------------------------
    def graph_capture(self) -> Capture:
        return Capture()

    def empty(self, shape: Any, dtype: Any) -> Any:
        import cupy

        return cupy.empty(shape, dtype=dtype)

    def zeros(self, shape: Any, dtype: Any) -> Any:
        import cupy

        return cupy.zeros(shape, dtype=dtype)

    def host_copies(self, args: tuple[object, ...], stream: object) -> tuple[tuple[object, ...], Callable[[], None]]:
        """As numba-cuda does for its kernels: host arrays copied to the device, and back after the launch."""
        moved, pairs = copied_to_device(args, stream)
        return moved, functools.partial(copy_back, pairs, stream)

    def for_current_device(self) -> CUDATarget:
        """The same options for the current device's architecture, where this is a launch's target (a
        reflection compiles for the architecture it names)."""
        if _reflecting.get():
            return self
        cc = device_cc()
        return self if cc == self.cc else target_for(cc).configured(self.options)

    def fork_worker(self) -> Callable[[], None] | None:
        """On Linux, od.precompile's workers are forks where compiling needs no driver: NVVM is a library, and
        so is nvJitLink, which links cubins where cuda.core's linker takes it (else the driver's cuLink*, which
        a forked child cannot use: spawned workers then). What the driver says -- the current device's
        architecture, the key its cubins are looked up by -- is asked here, before the fork."""
        if not sys.platform.startswith("linux"):
            return None
        if not gpu_usable():  # the workers store PTX, as any process without a GPU does
            return functools.partial(become_compile_fork, CompileFork(None, None))
        if not _links_without_driver():
            return None
        make_current()
        link_cc = CUDACodeLibrary._ensure_cc(None, None)  # numba-cuda's: what a launch's get_cubin() asks for
        return functools.partial(become_compile_fork, CompileFork(device_cc(), tuple(link_cc)))

    def _launches_load_cubins(self) -> bool:
        """Is this compile one that a launch here loads (not a reflection, and a usable GPU of this
        target's compute capability)?"""
        return not _reflecting.get() and gpu_usable() and self.cc == device_cc()

    def synchronize(self, device: int | str | None = None) -> None:
        """Wait for the work launched in the current context (``device`` None), in device ``device``'s
        primary context, or in every device's (``"all"``)."""
        drv = driver().driver
        if device is None:
            make_current()
            checked("cuCtxSynchronize", *drv.cuCtxSynchronize())
            return
        for ordinal in range(device_count()) if device == "all" else [device]:
            with self.on_device(ordinal, "od.synchronize"):
                checked("cuCtxSynchronize", *drv.cuCtxSynchronize())

    @contextlib.contextmanager
    def on_device(self, device: object, what: str = "od.cuda", stream: object = None) -> Iterator[None]:
        """Device ``device``'s primary context current on this thread for the block (pushed, then popped), a
        ``stream`` passed being one of that context; ``device`` None: the context current, or the stream's
        context where it is another one (pushed likewise)."""
        if device is None:
            context = context_of_stream(driver().stream(stream)) if stream is not None and gpu_usable() else None
            with contextlib.nullcontext() if context is None else pushed(context):
                yield
            return
        drv = driver().driver
        err, context = drv.cuDevicePrimaryCtxRetain(_checked_ordinal(device, what))
        checked("cuDevicePrimaryCtxRetain", err)
        try:
            with pushed(context):
                if stream is not None:
                    check_stream(driver().stream(stream), f"{what}(device={device})")
                yield
        finally:
            drv.cuDevicePrimaryCtxRelease(device)

    def check_launchable(self, stream: object = None) -> None:
        """A usable GPU, and the device's context current on this thread: the slow path of a launch may
        compile, link and load here (asked of the driver, not a flag: the thread may have popped it)."""
        if gpu_usable():
            make_current(verify=True)
        else:
            raise RuntimeError(
                "target='cuda' needs a usable NVIDIA GPU and driver, and numba-cuda finds none here "
                "(numba.cuda.is_available() is False). Launch with target='cpu' (or set "
                "OVERDUB_TARGET=cpu) to run kernels on the CPU target; od.code_ptx compiles for "
                "the GPU without one."
            )


bridge.name_typing_context(type(cuda_target.typing_context), "CUDA")


def current_target() -> CUDATarget:
    """The CUDA target of the architecture of the device current on the calling thread (asked at each slow-path
    launch and reflection: one process may drive GPUs of several architectures)."""
    return target_for(device_cc())


@functools.cache
def target_for(cc: tuple[int | str, ...]) -> CUDATarget:
    """The CUDA target for one compute capability -- (9, 0), or (9, 0, "a") for the arch-specific sm_90a --
    each keeping its own kernels."""
    return CUDATarget(cc)


runtime.register_cache(f"{__name__}.target_for", target_for, kept="a target is a definition: kernels are keyed by it")


def _configured(cc: tuple[int | str, ...], options: CompileOptions) -> CUDATarget:
    return target_for(cc).configured(options)


def device_cc(device: int | None = None, what: str = "od.cuda") -> tuple[int, ...]:
    """The compute capability a kernel launched on ``device`` (an ordinal) compiles for; ``None``: the device
    of the context current on this thread (none current: device 0, whose context a launch makes current).
    sm_90 where there is no usable GPU (compiling needs none)."""
    if device is not None:
        return _compute_capability(_checked_ordinal(device, what))
    if not gpu_usable():
        return DEFAULT_CC
    fork = compile_fork()
    if fork is not None and fork.device_cc is not None:  # a forked compile worker: its parent's device
        return fork.device_cc
    err, current = driver().driver.cuCtxGetDevice()
    return _compute_capability(0 if err else int(current))


def _links_without_driver() -> bool:
    """Does linking a cubin take nvJitLink (a library), not the driver's cuLink*? cuda.core's linker chooses:
    nvJitLink 12.3 or newer where it is installed."""
    try:
        from cuda.core import Linker

        which = getattr(Linker, "which_backend", None)
        if which is not None:
            return str(which()) == "nvJitLink"
        from numba.cuda.cudadrv.driver import _have_nvjitlink  # type: ignore[attr-defined]  # an older cuda.core: numba-cuda's test

        return bool(_have_nvjitlink())
    except Exception:  # no toolkit's bindings: nothing links here
        return False


def _checked_ordinal(device: object, what: str) -> int:
    """``device``, refused with a clear ValueError unless it is one of this machine's devices."""
    count = device_count() if gpu_usable() else 0
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < count:
        have = f"devices 0..{count - 1}" if count else "no usable GPU (give cc= to compile for an architecture)"
        raise ValueError(f"{what}(device={device!r}): this machine has {have}")
    return device


@functools.cache
def _compute_capability(device: int) -> tuple[int, ...]:
    drv = driver().driver
    attribute = drv.CUdevice_attribute
    err, major = drv.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
    err_minor, minor = drv.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
    if err or err_minor:  # a broken driver install: compile for the default
        return DEFAULT_CC
    return (int(major), int(minor))


runtime.register_cache(
    f"{__name__}._compute_capability", _compute_capability, kept="a fact of the machine, asked once per device"
)
