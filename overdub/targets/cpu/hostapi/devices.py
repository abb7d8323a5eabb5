"""numba-cuda's devices and contexts on the CPU target: one device, the host, whose workers run the grids.

``cuda.gpus``, ``cuda.select_device(0)``, ``cuda.get_current_device()`` and ``cuda.current_context()`` answer
as numba-cuda's do for a machine with one GPU, device 0. It reports compute capability 9.0, the code the CPU
target runs (every construct numba-cuda compiles for sm_90: float atomics, cooperative grid sync, float16),
and CUDA's limits, which CPU-target launches check as a GPU does (1024 threads a block, 48 KiB of dynamic
shared memory). ``cuda.is_available()`` is true: kernels run here, as under numba's CUDA simulator.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

from ... import cpu as cpu_target
from ... import get_target
from . import streams

__all__ = [
    "Device",
    "Context",
    "PendingDeallocations",
    "gpus",
    "select_device",
    "get_current_device",
    "list_devices",
    "current_context",
    "require_context",
    "close",
    "detect",
    "is_available",
    "is_supported_version",
    "cuda_error",
    "is_float16_supported",
    "is_bfloat16_supported",
    "is_fp8_supported",
    "defer_cleanup",
    "profiling",
    "profile_start",
    "profile_stop",
]

F = TypeVar("F", bound=Callable[..., object])


class MemoryInfo(NamedTuple):
    free: int
    total: int


class Device:
    """The CPU target as numba-cuda's ``Device``: its id, name, compute capability and CUDA's limits."""

    id = 0
    name = "CPU (overdub CPU target)"
    uuid = "CPU-00000000-0000-0000-0000-000000000000"
    compute_capability = (9, 0)
    supports_float16 = True
    supports_bfloat16 = False
    supports_fp8 = False
    WARP_SIZE = 32
    MAX_THREADS_PER_BLOCK = 1024
    MAX_BLOCK_DIM_X = MAX_BLOCK_DIM_Y = 1024
    MAX_BLOCK_DIM_Z = 64
    MAX_GRID_DIM_X = 2**31 - 1
    MAX_GRID_DIM_Y = MAX_GRID_DIM_Z = 65535
    MAX_SHARED_MEMORY_PER_BLOCK = 49152
    KERNEL_EXEC_TIMEOUT = 0
    TCC_DRIVER = 0

    @property
    def MULTIPROCESSOR_COUNT(self) -> int:
        """The workers that run a grid's blocks (``OVERDUB_CPU_THREADS``)."""
        return int(cpu_target.TARGET.workers)

    def get_primary_context(self) -> Context:
        return _CONTEXT

    def reset(self) -> None:
        """Nothing to reset: the CPU target keeps no device state."""

    def __repr__(self) -> str:
        return f"<CUDA device {self.id} '{self.name}'>"


class PendingDeallocations:
    """numba-cuda's queue of device memory waiting to be freed (``current_context().deallocations``, which
    libraries clear before they measure): the CPU target's device memory is numpy's, freed when unreferenced,
    so nothing ever waits here."""

    def add_item(self, dtor: Callable[..., object], handle: object, size: int = -1) -> None:
        """Free ``handle`` with ``dtor`` now: nothing is deferred."""
        dtor(handle)

    def clear(self) -> None:
        """Free what waits: nothing does."""

    @contextlib.contextmanager
    def disable(self) -> Iterator[None]:
        """Defer freeing in the block (numba-cuda's ``defer_cleanup``): numpy frees what is unreferenced."""
        yield

    def __len__(self) -> int:
        return 0


class Context:
    """The CPU target as numba-cuda's ``Context``: synchronize, memory info, the device, its pending
    deallocations, streams and events."""

    device = Device()
    deallocations = PendingDeallocations()

    def defer_cleanup(self) -> contextlib.AbstractContextManager[None]:
        return self.deallocations.disable()

    def get_default_stream(self) -> streams.Stream:
        return streams.default_stream()

    def create_stream(self) -> streams.Stream:
        return streams.stream()

    def create_event(self, timing: bool = True) -> streams.Event:
        return streams.event(timing)

    def synchronize(self) -> None:
        get_target("cpu").synchronize()

    def get_memory_info(self) -> MemoryInfo:
        """Free and total host memory, in bytes (what device arrays of the CPU target take)."""
        page = os.sysconf("SC_PAGE_SIZE")
        return MemoryInfo(os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page)

    def reset(self) -> None:
        """Nothing to reset."""

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return "<CUDA context of the overdub CPU target>"


_CONTEXT = Context()


class DeviceList:
    """``cuda.gpus``: the one device of the CPU target; ``with cuda.gpus[0]:`` makes it current."""

    def __getitem__(self, devnum: int) -> Context:
        if devnum != 0:
            raise IndexError(f"the CPU target has one device, 0, not {devnum}")
        return _CONTEXT

    def __iter__(self) -> Iterator[Device]:
        return iter([_CONTEXT.device])

    def __len__(self) -> int:
        return 1

    @property
    def current(self) -> Device:
        return _CONTEXT.device

    def __str__(self) -> str:
        return f"<Managed Device {_CONTEXT.device.id}>"


gpus = DeviceList()


def select_device(device_id: int) -> Device:
    """Make device ``device_id`` current: the CPU target has device 0 only."""
    return gpus[device_id].device  # refuses any other id


def get_current_device() -> Device:
    return _CONTEXT.device


def list_devices() -> DeviceList:
    return gpus


def current_context(devnum: int | None = None) -> Context:
    return _CONTEXT if devnum is None else gpus[devnum]


def require_context(fn: F) -> F:
    """numba-cuda's decorator making sure a context exists: the CPU target always has one."""
    return fn


def close() -> None:
    """Release the contexts: the CPU target has nothing to release."""


def detect() -> bool:
    """Print the devices found, as numba-cuda does; True: the CPU target runs kernels."""
    device = _CONTEXT.device
    print("Found 1 CUDA devices")
    print(f"id {device.id}    {device.name:>20} {'[SUPPORTED]':>40}")
    print(f"{'Compute Capability':>40}: {device.compute_capability[0]}.{device.compute_capability[1]}")
    print("Summary:\n\t1/1 devices are supported")
    return True


def is_available() -> bool:
    """Can kernels run? On the CPU target, always."""
    return True


def is_supported_version() -> bool:
    return True


def cuda_error() -> None:
    """The error of initialising the driver: none, the CPU target needs none."""
    return None


def is_float16_supported() -> bool:
    return True


def is_bfloat16_supported() -> bool:
    return False


def is_fp8_supported() -> bool:
    return False


@contextlib.contextmanager
def defer_cleanup() -> Iterator[None]:
    """Defer freeing device memory in the block: numpy frees host memory when it is unreferenced."""
    yield


@contextlib.contextmanager
def profiling() -> Iterator[None]:
    """A block profiled by the CUDA profiler: there is none on the CPU target."""
    yield


def profile_start() -> None:
    """Start the CUDA profiler: there is none on the CPU target."""


def profile_stop() -> None:
    """Stop the CUDA profiler: there is none on the CPU target."""
