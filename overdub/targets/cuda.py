"""The CUDA target: numba-cuda lowers the rewritten kernel to NVVM IR, libNVVM to PTX, the driver loads it.

Callees are compiled with ``compile_cuda`` for an explicit compute capability and registered with the CUDA
target context directly, which is what lets kernels calling generic device methods compile to PTX on a
machine with no GPU (numba's own device functions ask the current device for its compute capability). A
registration lives exactly as long as the method instance that made it.

A launch does only what it must: check the guards, marshal each argument into the kernel's parameter slots
(how, each :mod:`overdub.arguments` kind says) and call the driver's ``cuLaunchKernel``. Where the native
extension is built and has a table entry for every argument's kind, all of it runs in C (``_fastlaunch.c``);
otherwise a generated Python launch function packs every slot with one ``struct.pack_into``.

Host (numpy) arrays are rejected with a message saying what to pass instead: copying silently in and out
would hide two transfers in every launch.

Host threads: a CUDA context is current per host thread, and cuda.core's ``Device`` also records per thread
whether ``set_current()`` was called (its ``sync()`` and others refuse until it was). A thread that never used
the GPU -- a Dask worker's, a ``ThreadPoolExecutor``'s -- may launch, compile, load, synchronize at any time:
every path that may reach the driver first makes the device's primary context current on the calling thread
(:func:`make_current`: once per thread, a thread-local flag after that). The launch itself needs none: a
``CUfunction`` carries its context; a launch the driver refuses for want of a current context
(``CUDA_ERROR_INVALID_CONTEXT``) makes it current and is tried again.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import os
import struct
import threading
import weakref
from collections.abc import Iterator

import numpy as np
from numba import cuda as numba_cuda
from numba.core import types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.typing.templates import signature
from numba.cuda import dispatcher as numba_cuda_dispatcher
from numba.cuda.codegen import CUDACodeLibrary
from numba.cuda.compiler import compile_cuda, kernel_fixup
from numba.cuda.cudadrv import nvvm
from numba.cuda.descriptor import cuda_target
from numba.cuda.typing.typeof import Purpose
from numba.cuda.typing.typeof import typeof as cuda_typeof

from .. import arguments, bridge
from ..arguments import HostMemoryError
from ..bridge.hidden import HiddenArgumentCall
from ..bridge.pointers import forwarded_views
from ..context import CUDA, TargetRoot
from ..intrinsics import cuprintln
from ..runtime import runtime
from . import arraylayout, launchfn
from .gpu import DEFAULT_CC, gpu_usable
from .options import CompileOptions, Configurable

try:
    from .. import _fastlaunch
except ImportError:  # built without a C compiler: the generated Python launch path serves
    _fastlaunch = None
else:
    _fastlaunch.set_scalar_layouts(arraylayout.scalar_layouts())

# --- streams --------------------------------------------------------------------------------------------

stream_handle = launchfn.stream_handle  # the CUstream handle of a cupy, numba or cuda.core stream


# --- the driver (loaded on first launch; compiling needs none) ------------------------------------------

CUDA_ERROR_INVALID_CONTEXT = 201  # CUresult: no context is current on the calling thread

_thread = threading.local()  # .current: has make_current() run on this host thread?


def make_current(verify: bool = False) -> None:
    """Make the current device's primary context current on the calling host thread (cuda.core
    ``Device().set_current()``: the thread's current device, else device 0, as the CUDA runtime chooses), once
    per thread. ``verify``: ask the driver whether a context is still current here (the thread may have popped
    it, e.g. ``numba.cuda.close()``), for the slow path of a launch, which is not run per launch."""
    if getattr(_thread, "current", False) and not (verify and not _context_is_current()):
        return
    from cuda.core import Device

    Device().set_current()
    _thread.current = True


def _context_is_current() -> bool:
    err, context = driver().driver.cuCtxGetCurrent()
    return not err and int(context) != 0


def make_current_if_gpu() -> None:
    """:func:`make_current` where a usable GPU is (compiling needs none; where there is one, numba-cuda and
    cuda.core may ask the driver while compiling and linking)."""
    if gpu_usable():
        make_current()


class Driver:
    """The few driver entry points a launch needs, bound once a GPU is used."""

    def __init__(self):
        from cuda.bindings import driver  # the CUDA driver bindings load libcuda: only with a GPU

        self.driver = driver
        self.null_stream = driver.CUstream(0)
        self.launch_kernel = driver.cuLaunchKernel
        self.launch_cooperative = driver.cuLaunchCooperativeKernel
        libcuda = ctypes.CDLL("libcuda.so.1")
        # what the native launch function calls (its launch follows a stream of another context into it)
        self.native_entries = tuple(
            int(ctypes.cast(getattr(libcuda, name), ctypes.c_void_p).value or 0)
            for name in (
                *("cuLaunchKernel", "cuCtxGetCurrent", "cuKernelGetFunction"),
                *("cuStreamGetCtx", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2"),
            )
        )
        self.graph_launch = int(ctypes.cast(libcuda.cuGraphLaunch, ctypes.c_void_p).value or 0)  # od.graph's replay
        self._streams: dict[int, object] = {}

    def stream(self, stream):
        """The driver's CUstream for a user stream; cached by handle."""
        handle = stream_handle(stream)
        wrapped = self._streams.get(handle)
        if wrapped is None:
            wrapped = self._streams[handle] = self.driver.CUstream(handle)
        return wrapped

    def potential_block_size(self, function, shmem: int) -> int:
        """The block size with the most occupancy for ``function`` (cuOccupancyMaxPotentialBlockSize)."""
        make_current()
        err, _, block = self.driver.cuOccupancyMaxPotentialBlockSize(function, None, shmem, 0)
        if err:
            raise RuntimeError(f"cuOccupancyMaxPotentialBlockSize failed: {err!r}")
        return block

    def co_resident_blocks(self, function, threads: int, shmem: int) -> int:
        """How many blocks of ``threads`` threads (and ``shmem`` bytes of dynamic shared memory) of ``function``
        the device holds at once: the most a cooperative launch may have."""
        from cuda.core import Device

        make_current()
        err, per_sm = self.driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, shmem)
        if err:
            raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: {err!r}")
        return per_sm * Device().properties.multiprocessor_count

    def kernel(self, library):
        """The kernel library's ``CUkernel``: loaded once, context-independent (``cuLibraryLoadData``, as
        cuda.core loads it). Launched with it, the driver finds the kernel's function in the context current
        on the launching thread -- loading it there the first time -- so one launch function serves every
        context and device of this architecture."""
        make_current()
        return library.get_cufunc().kernel._handle

    def function(self, kernel):
        """The ``CUfunction`` of a ``CUkernel`` in the current context (the driver loads it there the first
        time), or None where it cannot; with no context current, the device's is made current first."""
        make_current()
        err, function = self.driver.cuKernelGetFunction(kernel)
        return None if err else function

    def current_context(self) -> int:
        err, context = self.driver.cuCtxGetCurrent()
        return 0 if err else int(context)


@functools.cache
def driver() -> Driver:
    return Driver()


runtime.register_cache(f"{__name__}.driver", driver, kept="the CUDA driver's bindings, one per process")


# --- launcher -------------------------------------------------------------------------------------------


def _slots(argument) -> tuple:
    """An argument's CUDA parameter slots (:class:`overdub.arguments.Slot`), refusing what has no kind."""
    if argument.kind is None:
        raise TypeError(
            f"overdub cannot pass a {type(argument.value).__name__} (typed {argument.type}) to a CUDA kernel"
        )
    return argument.kind.slots(argument.signature, argument.type)


class CUDALauncher:
    """A compiled kernel (loaded on first launch) and how it is launched."""

    def __init__(self, library, argtypes, call_helper=None, type_annotation=None):
        self.library = library
        self.type_annotation = type_annotation  # the typed IR, annotated on the source (inspect_types)
        self.call_helper = call_helper  # debug kernels: what the error codes threads record mean
        self.argtypes = tuple(argtypes)
        self.handle = None  # the CUkernel, loaded on first launch: every context's
        self._functions: dict[int, object] = {}  # context -> the kernel's CUfunction there
        self.lock = threading.Lock()
        # a kernel that synchronizes its grid (cuda.cg.this_grid().sync()) needs a cooperative launch
        self.cooperative = bool(getattr(library, "use_cooperative", False))
        self._co_resident: dict[tuple[int, int], int] = {}

    def _kernel(self):
        with self.lock:
            if self.handle is None:
                with toolkit():
                    self.handle = driver().kernel(self.library)
        return self.handle

    def _function(self):
        """The kernel's CUfunction in the context current on this thread, or None where the driver cannot load
        it there (a device of another architecture than the code's). The native launch function keeps its own
        per-context table, in C."""
        drv = driver()
        context = drv.current_context()
        function = self._functions.get(context) if context else None
        if function is None:
            function = drv.function(self._kernel())  # makes a context current where none is
            if function is not None:
                self._functions[drv.current_context()] = function
        return function

    def launch_function(self, kernel, described):
        slots = [_slots(argument) for argument in described]
        if self.cooperative or self.call_helper is not None:
            return self._generated(kernel, described, slots)
        return self._native(kernel, described, slots) or self._generated(kernel, described, slots)

    def _native(self, kernel, described, slots):
        """The C launch function, where the extension is built, every argument's kind has a native spec and
        the kernel's parameter slots fit its buffer."""
        if _fastlaunch is None or sum(map(len, slots)) > arguments.MAX_NATIVE_SLOTS:
            return None
        specs = [a.kind.native_spec(a.signature, arg_slots) for a, arg_slots in zip(described, slots)]
        checks = kernel.guard.native_checks()
        if None in specs or checks is None:
            return None
        if any(spec[0] == "a" for spec in specs):
            arraylayout.install(_fastlaunch)
        return _fastlaunch.Launcher(kernel, checks, specs, int(self._kernel()), driver().native_entries, stream_handle)

    @staticmethod
    def _packing(slots) -> tuple[dict, list[str], struct.Struct]:
        """How the parameter slots are written: the helpers' namespace, one Python expression per slot (of the
        argument variables a0, a1, ...), and the buffer's layout."""
        namespace: dict = {}
        values: list[str] = []
        for name, arg_slots in zip(launchfn.argument_names(len(slots)), slots):
            values += arguments.slot_values(arg_slots, name, namespace)
        return namespace, values, struct.Struct(arguments.slot_format([slot for each in slots for slot in each]))

    @staticmethod
    def _buffer(layout: struct.Struct) -> tuple[ctypes.Array, ctypes.Array]:
        """A parameter buffer of ``layout`` and the array of pointers to its 8-byte slots the driver takes."""
        buffer = ctypes.create_string_buffer(max(layout.size, 8))
        base = ctypes.addressof(buffer)
        addresses = (ctypes.c_void_p * max(layout.size // 8, 1))(*[base + 8 * i for i in range(layout.size // 8)])
        return buffer, addresses

    def parameters(self, described) -> tuple[ctypes.Array, ctypes.Array]:
        """The kernel's parameters for the ``described`` arguments' values, as a launch passes them: the buffer
        and the array of pointers to its slots (a graph's kernel node takes them: ``od.graph``'s update)."""
        slots = [_slots(argument) for argument in described]
        namespace, values, layout = self._packing(slots)
        names = launchfn.argument_names(len(slots))
        pack = eval(f"lambda {', '.join(names)}: ({', '.join(values)}{',' if values else ''})", namespace)
        buffer, addresses = self._buffer(layout)
        layout.pack_into(buffer, 0, *pack(*(argument.value for argument in described)))
        return buffer, addresses

    def _generated(self, kernel, described, slots):
        """The Python launch function: one ``struct.pack_into`` writes every slot of one parameter buffer
        (per launcher, under its lock: the driver copies it during the call)."""
        namespace, values, layout = self._packing(slots)
        buffer, addresses = self._buffer(layout)
        enqueue = (
            "drv.launch_cooperative(function, gx, gy, gz, tx, ty, tz, shmem, hstream, slot_addresses)"
            if self.cooperative
            else "drv.launch_kernel(function, gx, gy, gz, tx, ty, tz, shmem, hstream, slot_addresses, 0)"
        )
        body = [
            "hstream = drv.null_stream if stream is None else drv.stream(stream)",
            "function = function_here()",
            "if function is None:",  # not loadable in this context (another architecture): the slow path
            "    return False",
        ]
        if self.cooperative:
            body += ["check_co_resident(gx * gy * gz, tx * ty * tz, shmem)"]
        checked = self.call_helper is not None
        body += [
            "with lock:",
            f"    pack_into(buffer, 0{', ' if values else ''}{', '.join(values)})",
            *(["    clear_error()"] if checked else []),
            f"    err, = {enqueue}",
            "    if err and in_context_now(err):",
            f"        err, = {enqueue}",
            "    if err:",
            "        return launch_failed(err, hstream)",
            *(["    raise_error(hstream)"] if checked else []),
        ]
        namespace |= {
            "drv": driver(),
            "lock": self.lock,
            "pack_into": layout.pack_into,
            "buffer": buffer,
            "slots": addresses,  # kept alive by the launch function
            "slot_addresses": ctypes.addressof(addresses),
            "function_here": self._function,
            "launch_failed": self._failed,
            "in_context_now": _in_context_now,
            "check_co_resident": self._check_co_resident,
            "clear_error": self._clear_error,
            "raise_error": self._raise_error,
        }
        return launchfn.generate(kernel, described, body, namespace, body_reads_stream=True)

    def suggested_block_size(self, shmem: int = 0) -> int:
        """The driver's occupancy-optimal block size for this kernel."""
        return driver().potential_block_size(self._function(), shmem)

    def _check_co_resident(self, blocks: int, threads: int, shmem: int) -> None:
        """A cooperative grid must be resident all at once, as numba-cuda requires: say so before launching."""
        limit = self._co_resident.get((threads, shmem))
        if limit is None:
            limit = self._co_resident[(threads, shmem)] = driver().co_resident_blocks(self._function(), threads, shmem)
        if blocks > limit:
            raise ValueError(
                f"the kernel synchronizes its whole grid (cuda.cg.this_grid().sync()), so every block "
                f"must be resident at once: this GPU holds at most {limit} blocks of {threads} threads"
                f"{f' with {shmem} bytes of shared memory' if shmem else ''}, not {blocks}; launch "
                f"fewer blocks (a grid-stride loop covers any size)"
            )

    # -- debug kernels: numba-cuda's protocol (a thread that raises stores an error code, its thread and block
    # in globals of the module named after the kernel; the host reads them after the launch)
    def _error_global(self, name: str):
        function = self.library.get_cufunc()
        return function.module.get_global_symbol(f"{function.name}__{name}__")[0]

    def _read_error_global(self, name: str) -> int:
        from numba.cuda.cudadrv import driver as numba_driver

        value = ctypes.c_int()
        numba_driver.device_to_host(ctypes.addressof(value), self._error_global(name), ctypes.sizeof(value))
        return value.value

    def _clear_error(self) -> None:
        make_current()  # a debug kernel's launch reads and writes its globals through the driver
        self._error_global("errcode").memset(0)

    def _raise_error(self, hstream) -> None:
        """After a debug kernel's launch (waiting for it): raise what a thread of it raised, if one did."""
        (err,) = driver().driver.cuStreamSynchronize(hstream)
        if err:
            self._failed(err)
        code = self._read_error_global("errcode")
        if code == 0:
            return
        thread = tuple(self._read_error_global("tid" + axis) for axis in "xyz")
        block = tuple(self._read_error_global("ctaid" + axis) for axis in "xyz")
        exc_class, exc_args, loc = self.call_helper.get_exception(code)
        where = f" at {os.path.basename(loc[1])}:{loc[2]}" if loc else ""
        message = exc_args[0] if exc_args else exc_class.__name__
        raise exc_class(f"{message}, in thread {thread} of block {block} of kernel {self.library.name}{where}")

    def _failed(self, err, hstream=None) -> bool:
        """After the driver refused a launch: False where the stream is another context's (the slow path
        launches in the stream's context), else the driver's error."""
        if _context_of_stream(hstream) is not None:
            return False
        raise RuntimeError(f"launching {self.library.name}: {err!r}")


@contextlib.contextmanager
def toolkit():
    """Where the CUDA toolkit's libraries are missing (a plain ``pip install overdub``: the CPU target only),
    compiling to PTX or a cubin says how to get them, instead of cuda-pathfinder's bare "libnvvm.so not found"."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ != "DynamicLibNotFoundError":
            raise
        raise RuntimeError(
            f"compiling for CUDA needs the CUDA toolkit's libraries (NVVM, NVRTC), which this install lacks "
            f"({exc}): install the GPU stack with pip install 'overdub[cuda]', or launch with target='cpu'"
        ) from exc


@functools.cache
def _several_devices() -> bool:
    """Does this machine have more than one GPU (asked once)? Only then are arrays checked for their device."""
    try:
        return gpu_usable() and _device_count() > 1
    except Exception:  # no driver: one device at most
        return False


runtime.register_cache(f"{__name__}._several_devices", _several_devices, kept="a fact of the machine, asked once")


def _check_same_device(value) -> None:
    """Where a machine has several GPUs: an array of another device than the one current for the launch is
    a clear error naming both (checked on the slow path, where a launch's arguments are described)."""
    interface = getattr(value, "__cuda_array_interface__", None)
    pointer = interface.get("data", (0,))[0] if isinstance(interface, dict) else 0
    if not pointer:
        return
    drv = driver().driver
    try:
        err, ordinal = drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer)
        err_here, here = drv.cuCtxGetDevice()
    except Exception:  # the bindings differ: no check rather than a wrong one
        return
    if int(err) == 0 and int(err_here) == 0 and int(ordinal) != int(here):
        raise ValueError(
            f"a {type(value).__name__} on device {int(ordinal)} passed to a launch on device {int(here)}: make "
            f"device {int(ordinal)} current (cupy.cuda.Device({int(ordinal)}).use()) or launch with "
            f"od.cuda(..., device={int(ordinal)}), or copy the array to device {int(here)}"
        )


def check_stream(hstream, what: str) -> None:
    """A clear error where ``hstream`` (a CUstream) belongs to another context than the one current on this
    thread: the driver refuses such a launch (CUDA_ERROR_INVALID_HANDLE)."""
    stream_context = _context_of_stream(hstream)
    if stream_context is not None:
        raise ValueError(
            f"{what}: the stream belongs to {_context_label(stream_context)}, the launch to the context current "
            f"on this thread ({_context_label(None)}); launch with the stream's device current "
            f"(cupy.cuda.Device(N).use()), or without device=, or with a stream of this one"
        )


def _context_of_stream(hstream):
    """The CUDA context ``hstream`` (a CUstream) belongs to, where it is not the one current on this thread
    (None where it is, for the null stream, or where that cannot be told)."""
    if hstream is None or not int(hstream):  # the null stream: the current context's
        return None
    drv = driver().driver
    try:
        err, context = drv.cuStreamGetCtx(hstream)
        err_here, here = drv.cuCtxGetCurrent()
    except Exception:  # the bindings differ: the driver's own error rather than a guess
        return None
    if int(err) or int(err_here) or int(context) == int(here):
        return None
    return context


@contextlib.contextmanager
def _pushed(context):
    """``context`` current on this thread for the block (pushed, then popped)."""
    drv = driver().driver
    _checked("cuCtxPushCurrent", *drv.cuCtxPushCurrent(context))
    try:
        yield
    finally:
        drv.cuCtxPopCurrent()


def _context_label(context) -> str:
    """``context`` (None: the current one) as "device N's context 0x..." for a message."""
    drv = driver().driver
    try:
        if context is not None:
            drv.cuCtxPushCurrent(context)
        try:
            err, device = drv.cuCtxGetDevice()
            err_ctx, current = drv.cuCtxGetCurrent()
        finally:
            if context is not None:
                drv.cuCtxPopCurrent()
    except Exception:
        return "another context"
    if int(err) or int(err_ctx):
        return "another context"
    return f"device {int(device)}'s context {int(current):#x}"


def _device_count() -> int:
    err, count = driver().driver.cuDeviceGetCount()
    _checked("cuDeviceGetCount", err)
    return int(count)


def _checked(call: str, err, *_results) -> None:
    if int(err):
        raise RuntimeError(f"{call} failed: {err!r}")


def _in_context_now(err) -> bool:
    """After a launch the driver refused: was it for want of a current context on this thread, now made
    current (try again)?"""
    if int(err) != CUDA_ERROR_INVALID_CONTEXT:
        return False
    make_current(verify=True)
    return True


# --- the target -----------------------------------------------------------------------------------------


def copied_to_device(args: tuple, stream=None) -> tuple:
    """numba-cuda's treatment of host arrays, for its drop-in (``od.jit``): each numpy array copied to the
    device; returns the new arguments and the (host, device) pairs to copy back after the launch."""
    make_current()
    pairs, moved = [], []
    for value in args:
        if isinstance(value, np.ndarray):
            device = numba_cuda.to_device(value, stream=stream or 0)
            pairs.append((value, device))
            value = device
        elif isinstance(arguments.kind_of(value), arguments.HostRecord):  # passed by its device address
            device = numba_cuda.to_device(np.array(value).reshape(1), stream=stream or 0)
            pairs.append((value, device))
            value = arguments.RecordOnDevice(device.device_ctypes_pointer.value, value.dtype, device)
        moved.append(value)
    return tuple(moved), pairs


def copy_back(pairs, stream=None) -> None:
    """Copy each device array back into its writable host array, each record into its host record (waits for
    the launch, as numba-cuda does)."""
    for host, device in pairs:
        if isinstance(host, np.void):
            back = device.copy_to_host(stream=stream or 0)[0]
            for name in host.dtype.names:
                host[name] = back[name]
        elif host.flags.writeable:
            device.copy_to_host(host, stream=stream or 0)


def _numba_typeof(value):
    return cuda_typeof(value, Purpose.argument)


def _refuse_host_memory(value, kind) -> None:
    raise HostMemoryError(
        f"a {kind.name.replace('_', ' ')} ({value!r:.60}) lives in host memory: pass a cupy array, a numba device "
        f"array (numba.cuda.to_device), any __cuda_array_interface__ object, or od.pointer of one to a CUDA "
        f"kernel, or launch through od.jit, which copies host arrays and records as numba-cuda does"
    )


class Registration:
    """A method instance's code, registered with the CUDA target context under ``impl_key`` for as long as
    this object lives (the method instance holds it)."""

    __slots__ = ("cres", "__weakref__")

    def __init__(self, cres, impl_key):
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

    def __init__(self, cc):
        self.compute_capability = cc


@contextlib.contextmanager
def _compiling_for(cc):
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


# numba-cuda internals: array reshapes lower to calls of C functions that numba-cuda's own kernels link from a
# CUDA source file shipped with it, when the kernel's code names them (dispatcher.py, reshape_funcs)
_RESHAPE_FUNCTIONS = ("nocopy_empty_reshape", "numba_attempt_nocopy_reshape")
_RESHAPE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(numba_cuda_dispatcher.__file__)), "reshape_funcs.cu")


def _helper_sources(library) -> tuple:
    """The sources of numba-cuda's helper functions the kernel's code calls, to link with it."""
    code = library.get_llvm_str()
    return (_RESHAPE_SOURCE,) if any(name in code for name in _RESHAPE_FUNCTIONS) else ()


class CUDATarget(Configurable):
    name = "cuda"
    base = CUDA
    compile_lock = global_compiler_lock

    def __init__(self, cc: tuple, options: CompileOptions = CompileOptions(), root: TargetRoot | None = None):
        self.cc, self.options = tuple(cc), options
        arch = "sm_" + "".join(map(str, self.cc))  # sm_90; sm_90a for (9, 0, "a"): an architecture of its own
        self.label = self._label(f"cuda ({arch})")
        if root is None:
            self.root = TargetRoot(f"cuda-{arch}", self)
            self.root.forward(print, cuprintln)
            for callee, view in forwarded_views():
                self.root.forward(callee, view)
        else:
            self.root = root.configured_for(self)

    def _with_options(self, options):
        return CUDATarget(self.cc, options, self.root)

    def __reduce__(self):
        """Pickled as what makes it in another process (``od.precompile``'s workers): the CUDA target of this
        compute capability configured with these options."""
        return _configured, (self.cc, self.options)

    def _compile(self, func, return_type, argtypes):
        """numba-cuda's compile of ``func`` for this compute capability and these options (no GPU needed)."""
        options = self.options
        # debug: NVVM's -g, which numba-cuda warns crashes with optimisation on
        nvvm_options = {"opt": 3 if options.opt and not options.debug else 0, "fastmath": options.fastmath}
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

    def argument(self, value) -> arguments.Argument:
        described = arguments.describe(value, _numba_typeof, "host", _refuse_host_memory)
        if described.kind is not None and _several_devices():
            _check_same_device(value)
        return described

    def typeof(self, value):
        return self.argument(value).type

    def compile_method(self, func, typing_context, argtypes, kws):
        folded, pysig = bridge.fold_call(func, argtypes, kws)
        cres = self._compile(func, None, folded)
        bridge.note_attribute_templates(cres)
        impl_key = ("overdub", cres.fndesc.mangled_name)
        sig = signature(cres.signature.return_type, *folded).replace(pysig=pysig)
        return sig, impl_key, Registration(cres, impl_key)

    def compile_host(self, func, argtypes):
        raise TypeError("od.overdub runs on the host: its calls compile for the CPU target, not target='cuda'")

    def call_with_state(self, sig, impl_key):
        from numba.cuda.descriptor import cuda_target

        calls = HiddenArgumentCall(cuda_target.target_context, sig, impl_key)
        return calls.sig, calls.impl_key, calls

    def compile_kernel(self, func, argtypes):
        cres = self._kernel_code(func, argtypes)
        return CUDALauncher(
            cres.library, argtypes, cres.call_helper if self.options.debug else None, cres.type_annotation
        )

    def _kernel_code(self, func, argtypes):
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
    def launcher_payload(self, launcher):
        """The kernel library's NVVM IR, PTX or cubin and its typed IR as text, or None where it cannot be
        serialised (it links files or refers to global device arrays) or needs this process (a debug kernel's
        error codes).

        The cubin is linked from the PTX for the device's own architecture -- numba-cuda's ``get_cubin()``
        compiles for the arch-specific target, sm_90a on a 9.0 device -- so the PTX for ``self.cc`` (sm_90)
        would be a second NVVM run that no launch loads; ``od.code_ptx`` makes it when asked."""
        library = launcher.library
        if self.options.debug:
            return None
        if self._launches_load_cubins():
            make_current()  # linking may ask the driver
            library.get_cubin()
        else:
            library.get_asm_str(cc=self.cc)
        try:
            states = library._reduce_states()
        except Exception:  # numba-cuda refuses (pickle.PicklingError, RuntimeError): not cacheable
            return None
        return {"library": states, "type_annotation": str(launcher.type_annotation)}

    def launcher_from_payload(self, payload, argtypes):
        """The loaded kernel's launcher, or None -- a miss -- for a launch here from an entry that holds no
        cubin (a reflection, or a process without this GPU, stored it): compiling again stores the cubin, so
        later processes do not link one at every start."""
        if self._launches_load_cubins() and not payload["library"].get("cubin_cache"):
            return None
        codegen = cuda_target.target_context.codegen()
        library = CUDACodeLibrary._rebuild(**dict(payload["library"], codegen=codegen))
        return CUDALauncher(library, argtypes, None, payload["type_annotation"])

    def for_current_device(self):
        """The same options for the current device's architecture, where this is a launch's target (a
        reflection compiles for the architecture it names)."""
        if _reflecting.get():
            return self
        cc = device_cc()
        return self if cc == self.cc else target_for(cc).configured(self.options)

    def _launches_load_cubins(self) -> bool:
        """Is this compile one that a launch here loads (not a reflection, and a usable GPU of this
        target's compute capability)?"""
        return not _reflecting.get() and gpu_usable() and self.cc == device_cc()

    def synchronize(self, device=None):
        """Wait for the work launched in the current context (``device`` None), in device ``device``'s
        primary context, or in every device's (``"all"``)."""
        drv = driver().driver
        if device is None:
            make_current()
            _checked("cuCtxSynchronize", *drv.cuCtxSynchronize())
            return
        for ordinal in range(_device_count()) if device == "all" else [device]:
            with self.on_device(ordinal, "od.synchronize"):
                _checked("cuCtxSynchronize", *drv.cuCtxSynchronize())

    @contextlib.contextmanager
    def on_device(self, device, what: str = "od.cuda", stream=None):
        """Device ``device``'s primary context current on this thread for the block (pushed, then popped), a
        ``stream`` passed being one of that context; ``device`` None: the context current, or the stream's
        context where it is another one (pushed likewise)."""
        if device is None:
            context = _context_of_stream(driver().stream(stream)) if stream is not None and gpu_usable() else None
            with contextlib.nullcontext() if context is None else _pushed(context):
                yield
            return
        drv = driver().driver
        err, context = drv.cuDevicePrimaryCtxRetain(_checked_ordinal(device, what))
        _checked("cuDevicePrimaryCtxRetain", err)
        try:
            with _pushed(context):
                if stream is not None:
                    check_stream(driver().stream(stream), f"{what}(device={device})")
                yield
        finally:
            drv.cuDevicePrimaryCtxRelease(device)

    def check_launchable(self, stream=None):
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


@functools.cache
def target_for(cc: tuple) -> CUDATarget:
    """The CUDA target for one compute capability -- (9, 0), or (9, 0, "a") for the arch-specific sm_90a --
    each keeping its own kernels."""
    return CUDATarget(cc)


runtime.register_cache(f"{__name__}.target_for", target_for, kept="a target is a definition: kernels are keyed by it")


def _configured(cc: tuple, options: CompileOptions) -> CUDATarget:
    return target_for(cc).configured(options)


def device_cc(device: int | None = None, what: str = "od.cuda") -> tuple[int, ...]:
    """The compute capability a kernel launched on ``device`` (an ordinal) compiles for; ``None``: the device
    of the context current on this thread (none current: device 0, whose context a launch makes current).
    sm_90 where there is no usable GPU (compiling needs none)."""
    if device is not None:
        return _compute_capability(_checked_ordinal(device, what))
    if not gpu_usable():
        return DEFAULT_CC
    err, current = driver().driver.cuCtxGetDevice()
    return _compute_capability(0 if err else int(current))


def _checked_ordinal(device, what: str) -> int:
    """``device``, refused with a clear ValueError unless it is one of this machine's devices."""
    count = _device_count() if gpu_usable() else 0
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
