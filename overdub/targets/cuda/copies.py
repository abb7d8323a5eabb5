"""numba-cuda's treatment of host memory, for its drop-in (``od.jit``): host arrays and records copied to the
device before a launch and back after it. (``od.cuda`` itself refuses host memory, naming what to pass.)"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda as numba_cuda
from numba.cuda.args import ArgHint

from ... import arguments
from ..numbacuda import performance_warning
from .driver import make_current


def copied_to_device(args: tuple[object, ...], stream: Any = None) -> tuple[tuple[object, ...], list[tuple[Any, Any]]]:
    """numba-cuda's treatment of host arrays, for its drop-in (``od.jit``): each numpy array copied to the
    device, in tuples too; returns the new arguments and the (host, device) pairs to copy back after the
    launch."""
    make_current()
    pairs: list[tuple[Any, Any]] = []
    moved = tuple(_copied(value, pairs, stream) for value in args)
    if any(isinstance(host, np.ndarray) for host, _ in pairs):
        message = "Host array used in CUDA kernel will incur copy overhead to/from device."
        performance_warning(message, "CUDA_WARN_ON_IMPLICIT_COPY", stacklevel=4)
    return moved, pairs


def _copied(value: Any, pairs: list[tuple[Any, Any]], stream: Any) -> object:
    if isinstance(value, ArgHint):  # cuda.In, Out, InOut: copied in and back as each says (its own to_device)
        after: list[Any] = []
        device = value.to_device(after, stream=stream or 0)  # type: ignore[no-untyped-call]  # numba-cuda's, unannotated
        pairs += [(write_back, None) for write_back in after]
        return device
    if type(value) is tuple:
        return tuple(_copied(element, pairs, stream) for element in value)
    if isinstance(arguments.kind_of(value), arguments.NumpyArray):
        device = numba_cuda.to_device(value, stream=stream or 0)
        pairs.append((value, device))
        return device
    if isinstance(arguments.kind_of(value), arguments.HostRecord):  # passed by its device address
        device = numba_cuda.to_device(np.array(value).reshape(1), stream=stream or 0)
        pairs.append((value, device))
        return arguments.RecordOnDevice(device.device_ctypes_pointer.value, value.dtype, device)
    return value


def copy_back(pairs: list[tuple[Any, Any]], stream: Any = None) -> None:
    """Copy each device array back into its writable host array, each record into its host record (waits for
    the launch, as numba-cuda does)."""
    for host, device in pairs:
        if device is None:  # a cuda.Out or InOut's own write-back (cuda.In's keeps its device array alive)
            host()
        elif isinstance(host, np.void):
            back = device.copy_to_host(stream=stream or 0)[0]
            for name in host.dtype.names or ():
                host[name] = back[name]
        elif host.flags.writeable:
            device.copy_to_host(host, stream=stream or 0)
