"""The CUDA driver as the CUDA target uses it: its bindings, loaded on the first launch (compiling needs none);
the context current on each host thread; streams and the contexts they belong to; the machine's devices.

Host threads: a CUDA context is current per host thread, and cuda.core's ``Device`` also records per thread
whether ``set_current()`` was called (its ``sync()`` and others refuse until it was). A thread that never used
the GPU -- a Dask worker's, a ``ThreadPoolExecutor``'s -- may launch, compile, load, synchronize at any time:
every path that may reach the driver first makes the device's primary context current on the calling thread
where none is (:func:`make_current`: once per thread, a thread-local flag after that; a context the program
made current stays). The launch itself needs none: a
``CUfunction`` carries its context; a launch the driver refuses for want of a current context
(``CUDA_ERROR_INVALID_CONTEXT``) makes it current and is tried again.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import threading
from collections.abc import Iterator
from typing import Any, SupportsInt, cast

from ...launchconfig import stream_handle  # the CUstream handle of a cupy, numba or cuda.core stream
from ...runtime import runtime
from ..gpu import gpu_usable

# --- the driver (loaded on first launch; compiling needs none) ------------------------------------------

CUDA_ERROR_INVALID_CONTEXT = 201  # CUresult: no context is current on the calling thread

_thread = threading.local()  # .current: has make_current() run on this host thread?


@dataclasses.dataclass(frozen=True)
class CompileFork:
    """What a fork of a process that may have used the driver knows of it: the child is one of
    ``od.precompile``'s workers, which only compiles -- NVVM and nvJitLink are libraries a fork can call; the
    driver, whose state a fork does not copy, is never asked there."""

    device_cc: tuple[int, ...] | None  # the architecture of the parent's current device (None: no usable GPU)
    link_cc: tuple[int | str, ...] | None  # numba-cuda's key of that device's cubins: (9, 0, "a")


_fork: list[CompileFork] = []  # in a forked compile worker, set first thing: this process must not ask the driver
runtime.register_cache(f"{__name__}._fork", _fork, kept="a fact of the process: a forked compile worker stays one")


def become_compile_fork(fork: CompileFork) -> None:
    """Run first in a forked compile worker (``od.precompile``'s), with what its parent knew."""
    _fork[:] = [fork]


def compile_fork() -> CompileFork | None:
    """What the parent knew, where this process is a forked compile worker; else None."""
    return _fork[0] if _fork else None


def make_current(verify: bool = False) -> None:
    """Make the current device's primary context current on the calling host thread (cuda.core
    ``Device().set_current()``: the thread's current device, else device 0, as the CUDA runtime chooses), once
    per thread -- where no context is current: one the program pushed (another context of the device, a
    library's) stays current, or the thread's launches would run in the primary context with that context's
    memory (an illegal address). ``verify``: ask the driver whether a context is still current here (the thread
    may have popped it, e.g. ``numba.cuda.close()``), for the slow path of a launch, which is not run per launch.
    A forked compile worker refuses (a RuntimeError: its parent compiles that call)."""
    if _fork:
        raise RuntimeError("a forked compile worker cannot use the CUDA driver: its parent compiles this call")
    if getattr(_thread, "current", False) and not (verify and _current_context() is None):
        return
    from cuda.core import Device

    before = _current_context()
    Device().set_current()  # cuda.core's record for the thread; it replaces the current context by the primary one
    if before is not None:  # a context the program made current (its own, a library's) stays current
        checked("cuCtxSetCurrent", *driver().driver.cuCtxSetCurrent(before))
    _thread.current = True


def _current_context() -> Any:
    """The CUcontext current on this thread, or None."""
    err, context = driver().driver.cuCtxGetCurrent()
    return None if int(err) or not int(context) else context


def make_current_if_gpu() -> None:
    """:func:`make_current` where a usable GPU is (compiling needs none; where there is one, numba-cuda and
    cuda.core may ask the driver while compiling and linking)."""
    if gpu_usable() and not _fork:
        make_current()


class Driver:
    """The few driver entry points a launch needs, bound once a GPU is used."""

    def __init__(self) -> None:
        from cuda.bindings import driver  # the CUDA driver bindings load libcuda: only with a GPU

        self.driver = driver
        self.null_stream = driver.CUstream(0)
        self.launch_kernel = driver.cuLaunchKernel
        self.launch_cooperative = driver.cuLaunchCooperativeKernel
        libcuda = ctypes.CDLL("libcuda.so.1")
        # what the native launch function calls (its launch follows a stream of another context into it)
        self.native_entries = cast(
            "tuple[int, int, int, int, int, int, int]",  # one for each of the seven names
            tuple(
                _address(libcuda, name)
                for name in (
                    *("cuLaunchKernel", "cuCtxGetCurrent", "cuKernelGetFunction"),
                    *("cuStreamGetCtx", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2"),
                    "cuCtxGetId",  # CUDA 12+ (0 where the driver has none)
                )
            ),
        )
        self.graph_launch = int(ctypes.cast(libcuda.cuGraphLaunch, ctypes.c_void_p).value or 0)  # od.graph's replay
        self._streams: dict[int, object] = {}

    def stream(self, stream: object) -> Any:
        """The driver's CUstream for a user stream; cached by handle."""
        handle = stream_handle(stream)
        wrapped = self._streams.get(handle)
        if wrapped is None:
            wrapped = self._streams[handle] = self.driver.CUstream(handle)
        return wrapped

    def potential_block_size(self, function: object, shmem: int) -> int:
        """The block size with the most occupancy for ``function`` (cuOccupancyMaxPotentialBlockSize)."""
        make_current()
        block: int
        err, _, block = self.driver.cuOccupancyMaxPotentialBlockSize(function, None, shmem, 0)
        if err:
            raise RuntimeError(f"cuOccupancyMaxPotentialBlockSize failed: {err!r}")
        return block

    def attributes(self, function: object) -> dict[str, int]:
        """What the device's code of ``function`` uses and allows, under numba-cuda's names for them."""
        make_current()
        attribute = self.driver.CUfunction_attribute
        found = {}
        for name, which in (
            ("regs_per_thread", attribute.CU_FUNC_ATTRIBUTE_NUM_REGS),
            ("shared_mem_per_block", attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            ("const_mem_size", attribute.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
            ("local_mem_per_thread", attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            ("max_threads_per_block", attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ):
            err, value = self.driver.cuFuncGetAttribute(which, function)
            if err:
                raise RuntimeError(f"cuFuncGetAttribute failed: {err!r}")
            found[name] = int(value)
        return found

    def co_resident_blocks(self, function: object, threads: int, shmem: int) -> int:
        """How many blocks of ``threads`` threads (and ``shmem`` bytes of dynamic shared memory) of ``function``
        the device holds at once: the most a cooperative launch may have."""
        from cuda.core import Device

        make_current()
        per_sm: int
        err, per_sm = self.driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, shmem)
        if err:
            raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: {err!r}")
        multiprocessors: int = Device().properties.multiprocessor_count
        return per_sm * multiprocessors

    def kernel(self, library: Any) -> Any:
        """The kernel library's ``CUkernel``: loaded once, context-independent (``cuLibraryLoadData``, as
        cuda.core loads it). Launched with it, the driver finds the kernel's function in the context current
        on the launching thread -- loading it there the first time -- so one launch function serves every
        context and device of this architecture. numba-cuda loads it in a primary context only: where another
        context of the device is current (a library's own), the device's primary context is pushed for it."""
        make_current()
        with primary_context():
            return library.get_cufunc().kernel._handle

    def prefer_carveout(self, kernel: object, percent: int) -> None:
        """Have ``kernel`` prefer ``percent`` of the unified L1/shared memory as shared memory, on every device
        (-1: the driver's default)."""
        attribute = self.driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
        for device in range(device_count()):
            (err,) = self.driver.cuKernelSetAttribute(attribute, percent, kernel, device)
            if err:
                raise launch_error(f"setting the shared memory carveout {percent}: {err!r}")

    def function(self, kernel: object) -> Any:
        """The ``CUfunction`` of a ``CUkernel`` in the current context (the driver loads it there the first
        time), or None where it cannot; with no context current, the device's is made current first."""
        make_current()
        err, function = self.driver.cuKernelGetFunction(kernel)
        return None if err else function

    def current_context(self) -> tuple[int, int]:
        """The context current on this thread, as its address and its ID (unique in the process: a context
        destroyed and another made at its address differ by it; 0 where the driver has no IDs), or (0, 0)."""
        err, context = self.driver.cuCtxGetCurrent()
        if err or not int(context):
            return 0, 0
        get_id = getattr(self.driver, "cuCtxGetId", None)
        err, number = get_id(context) if get_id is not None else (0, 0)
        return int(context), 0 if err else int(number)


def _address(library: ctypes.CDLL, name: str) -> int:
    """The address of ``name`` in ``library``, 0 where it has none."""
    entry = getattr(library, name, None)
    return 0 if entry is None else int(ctypes.cast(entry, ctypes.c_void_p).value or 0)


@functools.cache
def _launch_error_class() -> type[Exception]:
    """The error of a launch the driver refused: cuda.core's ``CUDAError`` (numba-cuda raises it, and its
    programs catch it), a RuntimeError too."""
    try:
        from cuda.core._utils.cuda_utils import CUDAError
    except ImportError:  # another cuda.core layout: a RuntimeError alone
        return RuntimeError
    return type("CUDALaunchError", (CUDAError, RuntimeError), {"__module__": __name__})


runtime.register_cache(f"{__name__}._launch_error_class", _launch_error_class, kept="a class, made once")


def launch_error(message: str) -> Exception:
    return _launch_error_class()(message)


def launch_error_of_code(code: int) -> Exception:
    """The error of a launch the native path made and the driver refused with ``code`` (a CUresult)."""
    from cuda.bindings import driver as bindings

    try:
        name = f"{bindings.CUresult(code).name} (CUresult {code})"
    except ValueError:
        name = f"CUresult {code}"
    return launch_error(f"cuLaunchKernel failed: {name}")


@functools.cache
def driver() -> Driver:
    return Driver()


runtime.register_cache(f"{__name__}.driver", driver, kept="the CUDA driver's bindings, one per process")


@contextlib.contextmanager
def toolkit() -> Iterator[None]:
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
def several_devices() -> bool:
    """Does this machine have more than one GPU (asked once)? Only then are arrays checked for their device."""
    try:
        return gpu_usable() and device_count() > 1
    except Exception:  # no driver: one device at most
        return False


runtime.register_cache(f"{__name__}.several_devices", several_devices, kept="a fact of the machine, asked once")


def check_same_device(value: object) -> None:
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


def check_stream(hstream: SupportsInt | None, what: str) -> None:
    """A clear error where ``hstream`` (a CUstream) belongs to another context than the one current on this
    thread: the driver refuses such a launch (CUDA_ERROR_INVALID_HANDLE)."""
    stream_context = context_of_stream(hstream)
    if stream_context is not None:
        raise ValueError(
            f"{what}: the stream belongs to {context_label(stream_context)}, the launch to the context current "
            f"on this thread ({context_label(None)}); launch with the stream's device current "
            f"(cupy.cuda.Device(N).use()), or without device=, or with a stream of this one"
        )


def context_of_stream(hstream: SupportsInt | None) -> Any:
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
def pushed(context: object) -> Iterator[None]:
    """``context`` current on this thread for the block (pushed, then popped)."""
    drv = driver().driver
    checked("cuCtxPushCurrent", *drv.cuCtxPushCurrent(context))
    try:
        yield
    finally:
        drv.cuCtxPopCurrent()


@contextlib.contextmanager
def primary_context() -> Iterator[None]:
    """The current device's primary context current on this thread for the block, where another context of the
    device is (pushed, then popped); nothing done where it is current already."""
    drv = driver().driver
    err, device = drv.cuCtxGetDevice()
    checked("cuCtxGetDevice", err)
    err, primary = drv.cuDevicePrimaryCtxRetain(device)
    checked("cuDevicePrimaryCtxRetain", err)
    try:
        err, here = drv.cuCtxGetCurrent()
        with contextlib.nullcontext() if not int(err) and int(here) == int(primary) else pushed(primary):
            yield
    finally:
        drv.cuDevicePrimaryCtxRelease(device)


def context_label(context: object) -> str:
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


def device_count() -> int:
    err, count = driver().driver.cuDeviceGetCount()
    checked("cuDeviceGetCount", err)
    return int(count)


def checked(call: str, err: SupportsInt, *_results: object) -> None:
    if int(err):
        raise RuntimeError(f"{call} failed: {err!r}")


def in_context_now(err: SupportsInt) -> bool:
    """After a launch the driver refused: was it for want of a current context on this thread, now made
    current (try again)?"""
    if int(err) != CUDA_ERROR_INVALID_CONTEXT:
        return False
    make_current(verify=True)
    return True
