"""The CPU target: numba machine code; a grid runs on every core, each block's threads in a compiled loop, or
as fibers where they synchronize.

A kernel is compiled into a *grid body* that the native runner (``overdub/targets/cpu/_cpugrid.c``) calls from a pool of
worker threads, without the GIL:

* a kernel with no barrier is inlined into a *row loop*: workers take chunks of blocks and cut them into rows
  of threads sharing their y and z indices, and the row loop runs a row's threads one after another by
  global x index (so LLVM vectorises across threads), only those the kernel's bounds guard admits
  (:mod:`.cpu_guard`);
* a kernel that uses barriers, shared memory or warp operations (:mod:`.cpu_sync`) is inlined into a
  *thread body*, and each thread of a block runs it as a fiber; a barrier switches to the next fiber;
* a kernel that synchronizes its grid runs as fibers too, every block of the grid resident at once.

Which one a kernel needs is known only once its code (and its callees') is generated, so a kernel is first
compiled as a row loop, and compiled again as a thread body when its code turned out to need fibers (the
kernel's own names are read first, so that a kernel naming ``syncthreads`` is compiled once).

The CUDA kernel idiom -- ``cuda.grid``, ``cuda.threadIdx`` and friends -- reads the grid state: registers of
the row loop or thread body, and for callees compiled on their own, the twelve int64 slots of the running
thread (the runner's ``od_state``). Launches run one at a time, in order, as on one CUDA stream, and return
when the grid is done.
"""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import itertools
import math
import secrets
import sys
import threading
import time
import types as pytypes
import typing
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import numba
from numba.core import bytecode, config
from numba.core.compiler import CompileResult
from numba.core.compiler_lock import global_compiler_lock
from numba.core.environment import Environment
from numba.core.registry import cpu_target
from numba.core.runtime import nrt

from ... import arguments, bridge, settings, world
from ...bridge.hidden import HiddenArgumentCall
from ...bridge.pointers import forwarded_views
from ...bridge.recursion import SelfCall
from ...context import when_imported
from ...intrinsics import LaunchNeed, cuprintln
from ...launchconfig import stream_handle
from ...roots import TargetRoot
from ...runtime import runtime
from ...types import typeof
from .. import launchfn
from ..interface import Target
from ..options import CompileOptions, Configurable
from ..registry import CPU
from . import checks as cpu_checks
from . import conversions as cpu_conversions  # noqa: F401  (registers the GPU's float to integer conversions)
from . import devicemath, half, libdevice, runner, vectors
from . import grid as cpu_grid
from . import libm as cpu_libm
from . import native as cpu_native
from . import printing as _printing  # noqa: F401  (registers how CPU code prints)
from . import ranges as cpu_ranges  # noqa: F401  (registers iter of a range without a division where it runs once)
from . import regions as cpu_regions
from . import state as cpu_state
from . import stores as cpu_stores
from . import sync as cpu_sync
from .atomics import ATOMIC
from .globalarrays import global_array
from .runner import UnsupportedOnCPU
from .sync import SYNC_NAMES, namespace
from .workers import Workers

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from ...arguments import Argument
    from ...bindings import Guarded
    from ...compiler import Kernel
    from .. import LaunchFunction

# numba internals: a compile result as numba's cache stores it (object code, function descriptor, signature)
_Serialised: TypeAlias = "tuple[Any, Any, Signature]"
# the disk cache's payload of a CPU kernel: the runner's mode, the grid body's code, the entry's ("serial": None)
_Payload: TypeAlias = "tuple[str, _Serialised, _Serialised | None]"

__all__ = ["TARGET", "CPUTarget", "CPUGridError", "UnsupportedOnCPU", "CUDA_IDIOM"]

CUDA_IDIOM = namespace(
    "cuda",
    grid=cpu_state.grid,
    gridsize=cpu_state.gridsize,
    threadIdx=cpu_state.threadIdx,
    blockIdx=cpu_state.blockIdx,
    blockDim=cpu_state.blockDim,
    gridDim=cpu_state.gridDim,
    laneid=cpu_state.laneid,
    shared=cpu_sync.SHARED,
    local=cpu_sync.LOCAL,
    const=cpu_sync.CONST,
    cg=cpu_sync.CG,
    atomic=ATOMIC,
    **{name: getattr(cpu_sync, name) for name in SYNC_NAMES},
    **{name: getattr(devicemath.STUBS, name) for name in devicemath.STUB_NAMES},
)
"""What ``numba.cuda`` (and each of the names it exports for kernels) means inside a CPU-target kernel."""


# --- the target -----------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None)


class _Allocating(threading.local):
    on = False  # a kernel that allocates compiles on this thread: with numba's runtime (NRT)


_allocating = _Allocating()


def _needs_nrt(exc: BaseException | None) -> bool:
    """Did a compile fail for want of numba's runtime (an array allocated in a kernel or a callee)?"""
    while exc is not None:
        if "NRT required but not enabled" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class CPUGridError(RuntimeError):
    """A grid the runner could not finish: threads of a block waiting at barriers that cannot complete."""


def _raise_grid_error(kernel: Kernel) -> typing.NoReturn:
    raise CPUGridError(f"{kernel.describe()}: {runner.last_error()}")


class CPULauncher:
    """Runs a compiled kernel's grid: its grid body on the runner, in the mode its code needs.

    A launch calls the entry's compiled entry point for the kernel's argument types directly, not numba's
    dispatcher: the launch function's guards have already pinned every argument's type, and the types overdub
    gives some values (an array of a struct: an array of its StructType) are not those numba's dispatcher
    would give them (an array of Records). (numba internals: ``Dispatcher.overloads[argtypes].entry_point``.)"""

    __slots__ = ("body", "address", "mode", "entry", "entry_point", "checked", "argtypes")

    def __init__(
        self,
        body: Dispatcher[Any],
        address: int,
        mode: str,
        entry: Dispatcher[Any],
        argtypes: tuple[Any, ...],
        checked: bool = False,
    ) -> None:
        self.body, self.address, self.mode, self.checked = body, address, mode, checked
        self.entry = entry  # the dispatchers own the code the entry point and the address run
        self.argtypes = argtypes
        self.entry_point = entry.overloads[cpu_grid.entry_types(argtypes)].entry_point  # type: ignore[attr-defined]  # numba's stub of CompileResult omits it

    def suggested_block_size(self, shmem: int = 0) -> int:
        """Threads run one after another in the row loop: a block this size keeps its rows long even where
        they hold one block (block rows)."""
        return 256

    @property
    def cooperative(self) -> bool:
        """Does the kernel synchronize its grid (numba-cuda launches such a kernel cooperatively)?"""
        return self.mode == runner.Need.GRID_SYNC.value

    def co_resident_blocks(self, threads: int, shmem: int = 0) -> int:
        """How many blocks of ``threads`` threads the runner holds at once: the most a launch of a kernel that
        synchronizes its grid may have."""
        return runner.MAX_RESIDENT_THREADS // max(int(threads), 1)

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        mode = cpu_grid.MODES[self.mode] | (0 if self.checked else cpu_grid.RAISE_ENDS_THREAD)
        # fibers: each one's stack; block regions: each thread's frame; other modes ignore it
        if self.mode == "block regions":
            stack = cpu_regions.frame_size(kernel.needs)
        else:
            stack = runner.fiber_stack_size(kernel.needs)
        native = None
        if not self.checked and runner.SYMBOLS is not None and len(described) == len(self.argtypes):
            native = cpu_native.launcher(
                kernel,
                described,
                cpu_grid.packed(self.argtypes),
                (runner.SYMBOLS["run"], self.address, mode, stack),
                Workers(),
                TARGET,
                _raise_grid_error,
                stream_handle,
                LaunchNeed.FLUSH_STDOUT in kernel.needs,
                self.mode == runner.Need.GRID_SYNC.value,
            )
        return native or self._generated(kernel, described, mode, stack)

    def _generated(self, kernel: Kernel, described: tuple[Argument, ...], mode: int, stack: int) -> LaunchFunction:
        """The launch function in Python: a checked launch, or arguments the native one does not pack."""
        names = "".join(f", {name}" for name in launchfn.argument_names(len(described)))
        run = f"failed = entry({mode}, workers, address, gx, gy, gz, tx, ty, tz, shmem, {stack}{names})"
        if self.mode == runner.Need.GRID_SYNC.value:  # every block resident: every worker
            timed = ["workers = TARGET.workers", run]
        else:  # a small grid may run faster on this thread alone (.workers), timed where the policy says
            timed = [
                "every, blocks = TARGET.workers, gx * gy * gz",
                "if every > 1 and blocks > 1:",
                "    workers = policy.use(blocks, every)",
                "    if policy.timing:",
                "        started = now()",
                f"        {run}",
                "        policy.ran(blocks, workers, now() - started)",
                "    else:",
                f"        {run}",
                "else:",
                "    workers = every",
                f"    {run}",
            ]
        body = (_checked_all(timed, kernel) if self.checked else timed) + _flush(kernel)
        body += ["if failed:", "    raise_grid_error(kernel)"]
        return launchfn.generate(
            kernel,
            described,
            body,
            {
                "entry": self.entry_point,
                "address": self.address,
                "TARGET": TARGET,
                "fflush": _libc.fflush,
                "raise_grid_error": _raise_grid_error,
                "raise_recorded": cpu_checks.raise_recorded,
                "policy": Workers(),
                "now": time.perf_counter_ns,
            },
        )


def _refuse_device_memory(value: object, kind: object) -> typing.NoReturn:
    raise TypeError(
        f"a {type(value).__name__} ({value!r:.60}) lives in GPU memory: the CPU target takes host memory (a "
        f"numpy array, od.pointer of one)"
    )


def _flush(kernel: Kernel) -> list[str]:
    """Device printf reaches the console at the end of each launch of a kernel that prints (and only then: a
    flush is a sixth of an empty launch)."""
    return ["fflush(None)"] if LaunchNeed.FLUSH_STDOUT in kernel.needs else []


def _checked(run: str, kernel: Kernel) -> list[str]:
    """A checked kernel's launch: an IndexError becomes the message cpu_checks recorded."""
    return _checked_all([run], kernel)


def _checked_all(lines: list[str], kernel: Kernel) -> list[str]:
    """``lines`` (a checked kernel's launch) where an IndexError becomes the message cpu_checks recorded."""
    return ["try:", *(f"    {line}" for line in lines), "except IndexError:",
            f"    raise_recorded({kernel.job.name!r})", "    raise"]  # fmt: skip


class SerialLauncher:
    """Where the runner is not built: the grid loop called on the launching thread, blocks one after another."""

    __slots__ = ("grid_loop", "argtypes", "entry_point", "checked")

    def __init__(self, grid_loop: Dispatcher[Any], argtypes: tuple[Any, ...], checked: bool = False) -> None:
        self.grid_loop, self.checked = grid_loop, checked
        self.argtypes = cpu_grid.serial_types(argtypes)  # the grid loop's
        self.entry_point = grid_loop.overloads[self.argtypes].entry_point  # type: ignore[attr-defined]  # numba's stub of CompileResult omits it

    suggested_block_size = CPULauncher.suggested_block_size
    cooperative = False  # a grid sync needs the runner: refused here

    def co_resident_blocks(self, threads: int, shmem: int = 0) -> int:
        """None: without the runner blocks run one after another, and a grid sync is refused."""
        return 0

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        arguments = "".join(f"{name}, " for name in launchfn.argument_names(len(described)))
        run = f"grid_loop({arguments}gx, gy, gz, tx, ty, tz, False, 0, gx * gy * gz, 0)"
        body = (_checked(run, kernel) if self.checked else [run]) + _flush(kernel)
        return launchfn.generate(
            kernel,
            described,
            body,
            {"grid_loop": self.entry_point, "fflush": _libc.fflush, "raise_recorded": cpu_checks.raise_recorded},
        )


# numba internals: numba names each compiled function by its qualified name and a counter that starts at 1 in
# every process (numba.core.bytecode.FunctionIdentity._unique_ids). Code loaded from the disk cache was named
# by another process's counter, and the JIT links symbols by name: two processes' "scale$3" must never meet.
# Each process starts the counter at a random multiple of 2**20 below 2**60 instead.
bytecode.FunctionIdentity._unique_ids = itertools.count(secrets.randbits(40) << 20)


def _compiled(dispatcher: Dispatcher[Any], argtypes: tuple[Any, ...]) -> Any:  # a CompileResult
    """numba internals: the one compile result of a dispatcher compiled for ``argtypes``."""
    return dispatcher.overloads[argtypes]


def _serialised(cres: Any) -> _Serialised | None:
    """numba internals: a compile result as numba's cache stores it (object code, the function's descriptor
    without its typing state, the signature), or None where its code holds addresses of this process."""
    if cres.library.has_dynamic_globals or cres.reload_init:
        return None
    loaded = _loaded_code.get(cres.library)
    if loaded is not None:  # its object code went to the JIT when it was loaded: stored as it was read
        return loaded
    fndesc = copy.copy(cres.fndesc)
    fndesc.typemap = fndesc.calltypes = fndesc.global_dict = None  # typing state and exec namespace
    return cres.library.serialize_using_object_code(), fndesc, cres.signature


def _rebuilt(serialised: _Serialised) -> CompileResult:
    """numba internals: the compile result of ``_serialised``'s answer, its code loaded into this process."""
    libdata, fndesc, signature = serialised
    if any(isinstance(part, bytes) and b"NRT_" in part for part in libdata[2]):
        nrt.rtsys.initialize(cpu_target.target_context)  # code that allocates: numba's runtime, its symbols
    cres: CompileResult = CompileResult._rebuild(  # type: ignore[no-untyped-call]  # numba's is unannotated
        cpu_target.target_context, libdata, fndesc, Environment({}), signature, False, (), "", (), ()
    )
    _loaded_code[cres.library] = serialised  # type: ignore[attr-defined]  # numba's stub of CompileResult omits it
    return cres


# a code library loaded from the disk cache -> what it was loaded from: numba hands a loaded library's object
# code to the JIT and keeps none, so a kernel compiled later that shares it (the grid entry of its argument
# types) is stored with this (else: "no compiled object yet", and never stored)
_loaded_code: weakref.WeakKeyDictionary[Any, _Serialised] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._loaded_code", _loaded_code, kept="what loaded code was read from, as it lives")


@dataclasses.dataclass(frozen=True)
class CPUCode:
    """A kernel's code on the CPU target, as ``compile_kernel`` or the disk cache makes it: numba's
    dispatchers holding its machine code, and the runner's mode for it."""

    mode: str  # the runner's mode (cpu_grid.MODES), or "serial": the grid loop where the runner is not built
    body: Any  # the grid body's dispatcher; the serial grid loop's where mode is "serial"
    address: int  # the grid body's compiled address (0: serial)
    entry: Any  # the entry's dispatcher, shared by the kernels of the same argument types (None: serial)
    argtypes: tuple[Any, ...]
    checked: bool

    @property
    def compiled(self) -> Any:
        """numba internals: the compile result of the grid body (of the serial grid loop)."""
        if self.mode == "serial":
            return _compiled(self.body, cpu_grid.serial_types(self.argtypes))
        return _compiled(self.body, cpu_grid.BODY_TYPES)


class CPUTarget(Configurable, Target):
    name = "cpu"
    base = CPU
    compile_lock = global_compiler_lock
    global_array = staticmethod(global_array)
    """A global numpy array a kernel reads is read live, through its pointer (globalarrays.py)."""

    def __init__(self, options: CompileOptions = CompileOptions(), root: TargetRoot | None = None) -> None:
        self.options = options
        self.label = self._label("cpu")
        self.root: TargetRoot = TargetRoot("cpu", self) if root is None else root.configured_for(self)
        # debug: bounds checks (cpu_checks names the site) and Python's error model (x // 0 raises)
        self._njit_options: dict[str, Any] = {
            "_nrt": False,
            "fastmath": options.fastmath,
            "boundscheck": options.debug,
            "error_model": "python" if options.debug else "numpy",
        }
        self.workers = settings.CPU_THREADS.value()
        """How many threads run a grid's blocks: $OVERDUB_CPU_THREADS, else every core (launches read the
        default target's, ``overdub.targets.cpu.TARGET.workers``, whatever their options)."""

    def _options(self) -> dict[str, Any]:
        """numba's options for this target's compiles on this thread: with numba's runtime while a kernel that
        allocates compiles (:meth:`compile_kernel`)."""
        return {**self._njit_options, "_nrt": True} if _allocating.on else self._njit_options

    def _with_options(self, options: CompileOptions) -> CPUTarget:
        return CPUTarget(options, self.root)

    def __reduce__(self) -> tuple[Callable[[CompileOptions], CPUTarget], tuple[CompileOptions]]:
        """Pickled as what makes it in another process (``od.precompile``'s workers): the CPU target configured
        with these options."""
        return _configured, (self.options,)

    @property
    def cache_tag(self) -> str:
        """What the machine code depends on besides the kernel: the host's triple, CPU and its features, the
        compile options, numba's settings that change code (``NUMBA_OPT``, ``NUMBA_BOUNDSCHECK``, ...), and
        the grid runner the code calls (which build of it, or none: then the code is the serial grid loop)."""
        settings = (config.OPT, config.BOUNDSCHECK, config.DEBUGINFO_DEFAULT)  # type: ignore[attr-defined]  # numba's config module sets them at import
        return (
            f"cpu:{cpu_target.target_context.codegen().magic_tuple()}:{self.options!r}:{settings}:"
            f"runner={runner.runner_digest()}"
        )

    def argument(self, value: object) -> arguments.Argument:
        return arguments.describe(value, typeof, "device", _refuse_device_memory)

    def compile_method(
        self,
        func: Callable[..., object],
        typing_context: TypingContext,
        argtypes: tuple[Any, ...],
        kws: dict[str, Any],
    ) -> tuple[Signature, object, Dispatcher[Any]]:
        # called only from compiled code: without the wrappers a call from Python needs (compile latency)
        dispatcher = numba.njit(func, no_cpython_wrapper=True, no_cfunc_wrapper=True, **self._options())  # type: ignore[call-overload]  # numba's stub of njit omits its target options
        with cpu_checks.checking(self.options.debug):
            sig, impl_key = bridge.dispatcher_call(typing_context, dispatcher, argtypes, kws)
        bridge.note_attribute_templates(dispatcher)
        return sig, impl_key, dispatcher  # the dispatcher must outlive every caller's code

    def self_call(self, sig: Signature, state: Any) -> tuple[object, object]:
        calls = SelfCall(cpu_target.target_context, sig, state)
        return calls.impl_key, calls

    def compile_host(self, func: Callable[..., object], argtypes: tuple[Any, ...]) -> Dispatcher[Any]:
        """A host entry point of ``func`` (rewritten in a chain) for these argument types: a numba dispatcher
        with its Python wrapper, compiled now and closed to other types (``od.overdub``)."""
        cpu_stores.install()
        dispatcher: Dispatcher[Any] = numba.njit(func, **self._njit_options)
        with cpu_checks.checking(self.options.debug):
            dispatcher.compile(tuple(argtypes))
        dispatcher.disable_compile()
        return dispatcher

    def call_with_state(self, sig: Signature, impl_key: object) -> tuple[Signature, object, HiddenArgumentCall]:
        calls = HiddenArgumentCall(cpu_target.target_context, sig, impl_key)  # type: ignore[no-untyped-call]  # the bridge's is unannotated
        return calls.sig, calls.impl_key, calls

    def code(self, code: CPUCode, kind: str) -> str:
        """A kernel's code as this target made it: its LLVM IR ("llvm") or native assembly ("asm") -- the grid
        body's, the kernel's own code (the loop over threads around it is the same for every kernel).
        (numba internals: a compile result's library.)"""
        if kind not in ("llvm", "asm"):
            return super().code(code, kind)
        cres = code.compiled
        if cres.library in _loaded_code:
            raise ValueError(
                "this kernel was loaded from the disk cache as machine code, which holds no IR: read it with "
                "OVERDUB_CACHE=0 (docs/settings.md), or after od.reset()"
            )
        text: str = cres.library.get_llvm_str() if kind == "llvm" else cres.library.get_asm_str()
        return text

    def compile_kernel(self, func: Callable[..., Any], argtypes: tuple[Any, ...]) -> CPUCode:
        """The kernel's code, compiled without numba's runtime (NRT) -- reference counts cost every launch --
        unless the kernel or a callee allocates an array (``a.copy()``, ``np.empty``): then compiled again,
        with it, callees included."""
        cpu_stores.install()
        cpu_regions.install()
        try:
            return self._compile_kernel(func, argtypes)
        except Exception as exc:
            if _allocating.on or not _needs_nrt(exc):
                raise
        _allocating.on = True
        try:
            return self._compile_kernel(func, argtypes)
        finally:
            _allocating.on = False

    def _compile_kernel(self, func: Callable[..., Any], argtypes: tuple[Any, ...]) -> CPUCode:
        argtypes, checked, options = tuple(argtypes), self.options.debug, self._options()
        needs = typing.cast("Guarded", world.being_built()).needs  # a kernel compiles as the node being built
        with cpu_checks.checking(checked):
            if runner.SYMBOLS is None:
                grid_loop = cpu_grid.compile_serial(func, argtypes, options)
                bridge.note_attribute_templates(grid_loop)
                runner.check_local_memory(needs, f"kernel {func.__qualname__}")
                return CPUCode("serial", grid_loop, 0, None, argtypes, checked)
            body, address, mode = cpu_grid.compile_grid_body(func, argtypes, needs, options)
        bridge.note_attribute_templates(body)
        runner.check_local_memory(needs, f"kernel {func.__qualname__}")
        return CPUCode(mode, body, address, cpu_grid.entry(argtypes), argtypes, checked)

    def link(self, code: CPUCode) -> CPULauncher | SerialLauncher:
        if code.mode == "serial":
            return SerialLauncher(code.body, code.argtypes, code.checked)
        return CPULauncher(code.body, code.address, code.mode, code.entry, code.argtypes, code.checked)

    # -- the disk cache's view of a kernel's code: the runner's mode for it, the grid body's machine code (the
    # serial grid loop's where the runner is not built) and the entry's (shared by the kernels taking the
    # same argument types, and most of a small kernel's compile), each serialised as numba's own cache does
    # (numba/core/caching.py, CompileResultCacheImpl: CompileResult._reduce / _rebuild). ---------------------
    def serialized(self, code: CPUCode) -> _Payload | None:
        """The mode, the code of the grid body and of the entry, or None where the code holds addresses of
        this process (numba's "dynamic globals"; a checked kernel's record of a failed check)."""
        if self.options.debug:
            return None
        body = _serialised(code.compiled)
        if code.mode == "serial":
            return None if body is None else ("serial", body, None)
        entry = _serialised(_compiled(code.entry, next(iter(code.entry.overloads))))
        return None if body is None or entry is None else (code.mode, body, entry)

    def deserialized(self, stored: Any, argtypes: tuple[Any, ...]) -> CPUCode:
        mode, body, entry = stored
        if (mode == "serial") != (runner.SYMBOLS is None) or (mode != "serial" and mode not in cpu_grid.MODES):
            raise ValueError(f"a {mode!r} grid cannot run here")  # the cache tag keys by the runner: not reached
        argtypes, checked = tuple(argtypes), self.options.debug
        if mode == "serial":
            grid_loop = cpu_grid.loaded_serial(_rebuilt(body), len(argtypes), self._njit_options)
            return CPUCode("serial", grid_loop, 0, None, argtypes, checked)
        body, address = cpu_grid.loaded_body(_rebuilt(body), self._njit_options)
        return CPUCode(mode, body, address, cpu_grid.loaded_entry(argtypes, lambda: _rebuilt(entry)), argtypes, checked)

    def fork_worker(self) -> Callable[[], None] | None:
        """numba's CPU compiler needs no driver: forked workers on Linux (not macOS, whose system libraries do
        not survive a fork), which need nothing first."""
        return _nothing if sys.platform.startswith("linux") else None

    def synchronize(self, device: int | str | None = None) -> None:
        """Launches return when their grid is done: nothing is left to wait for but printf's buffer (the CPU
        is one device: ``device`` is None, 0 or "all")."""
        if device not in (None, 0, "all"):
            raise ValueError(f"od.synchronize(device={device!r}): the CPU target has one device, 0")
        _libc.fflush(None)


def _nothing() -> None:
    pass


def _configured(options: CompileOptions) -> CPUTarget:
    return TARGET.configured(options)


TARGET = CPUTarget()
bridge.name_typing_context(type(cpu_target.typing_context), "CPU")
TARGET.root.forward(print, cuprintln)
for _name in ("fmod", "remainder", "modf"):  # numba-cuda compiles them, numba's CPU target does not
    TARGET.root.forward(getattr(math, _name), getattr(cpu_libm, _name))
cpu_checks.install(cpu_state.read_slot)


@when_imported("numba.cuda")
def _define_numba_cuda(numba_cuda: pytypes.ModuleType) -> None:
    """What numba-cuda's names mean on the CPU target, added once numba-cuda is imported -- only then can a
    kernel name them, so nothing compiled before recompiles (:meth:`~overdub.roots.TargetRoot.add_imported`).
    The kernel idiom: calls are forwarded (so a context's overdub of ``cuda.grid`` still applies on the CPU),
    objects read for their attributes are replaced; numba-cuda's libdevice and fp16 placeholders, which mean
    nothing on the CPU, are forwarded to functions that compute there."""
    from numba.cuda import fp16  # type: ignore[attr-defined]  # numba-cuda's, untyped
    from numba.cuda import libdevice as numba_libdevice

    libdevice.define()
    forwards = forwarded_views()
    forwards += [(getattr(numba_libdevice, name), function) for name, function in vars(libdevice.LIBDEVICE).items()]
    forwards += [
        (function, half.cpu_function(name, function))
        for name in fp16.__all__
        if isinstance(function := getattr(fp16, name), pytypes.FunctionType)
    ]
    replacements: list[tuple[object, object]] = []
    for name in ("grid", "gridsize") + SYNC_NAMES + devicemath.STUB_NAMES:
        stub = getattr(numba_cuda, name)  # numba-cuda's stubs are classes: replaced, not forwarded
        (replacements if isinstance(stub, type) else forwards).append((stub, getattr(CUDA_IDIOM, name)))
    for name in ("threadIdx", "blockIdx", "blockDim", "gridDim", "laneid", "shared", "local", "atomic", "const", "cg"):
        replacements.append((getattr(numba_cuda, name), getattr(CUDA_IDIOM, name)))
        for member, value in vars(getattr(CUDA_IDIOM, name)).items():  # cuda.atomic.add held in a variable too
            if callable(value) and hasattr(getattr(numba_cuda, name), member):
                replacements.append((getattr(getattr(numba_cuda, name), member), value))
    replacements.append((numba_cuda.warpsize, 32))
    from numba.cuda.misc.special import literal_unroll  # type: ignore[import-not-found]

    replacements.append((literal_unroll, numba.literal_unroll))  # the one numba's CPU pipeline unrolls by
    vars(CUDA_IDIOM).update(vectors.register())
    vector_stubs = [(getattr(numba_cuda, name), made) for name, made in vectors.CONSTRUCTORS.items()]
    replacements += vector_stubs  # numba-cuda's vector types' stub classes (cuda.float32x4, cuda.float2 alike)
    TARGET.root.add_imported(forwards, replacements)
    TARGET.root.hide(*(made for _, made in vector_stubs))
    # on CUDA these are attributes of numba-cuda's stub classes (or stub classes themselves), not functions:
    # calls no hook observes there
    for name in ("shared", "local", "atomic", "const", "cg"):
        TARGET.root.hide(*(value for value in vars(getattr(CUDA_IDIOM, name)).values() if callable(value)))
    TARGET.root.hide(
        *(
            getattr(CUDA_IDIOM, name)
            for name in SYNC_NAMES + devicemath.STUB_NAMES
            if isinstance(getattr(numba_cuda, name), type)
        )
    )
