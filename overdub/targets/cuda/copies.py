"""numba-cuda's treatment of host memory, for its drop-in (``od.jit``): host arrays and records copied to the
device before a launch and back after it. (``od.cuda`` itself refuses host memory, naming what to pass.)"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda as numba_cuda
from numba.cuda.args import ArgHint, In

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
    if any(isinstance(host, np.ndarray) for host, _ in pairs):  # a cuda.In/Out/InOut's copies: no warning
        message = "Host array used in CUDA kernel will incur copy overhead to/from device."
        performance_warning(message, "CUDA_WARN_ON_IMPLICIT_COPY", stacklevel=4)
    return moved, pairs


def _copied(value: Any, pairs: list[tuple[Any, Any]], stream: Any) -> object:
    if isinstance(value, ArgHint):  # cuda.In, Out, InOut: what each says of a host array
        return _hinted(value, pairs, stream)
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


def _hinted(hint: Any, pairs: list[tuple[Any, Any]], stream: Any) -> object:
    """A ``cuda.In``, ``Out`` or ``InOut`` argument as numba-cuda launches it: a host array copied to the device
    (not for ``Out``) and back after the launch (not for ``In``, whose device copy is kept alive until then);
    anything else (a device array) passed as it is. Made here with numba-cuda's device arrays: the hint's own
    ``to_device`` now gives a cuda.core ``StridedMemoryView`` (no numba type) and needs a stream object."""
    host = hint.value
    if not isinstance(arguments.kind_of(host), arguments.NumpyArray):
        return host
    if getattr(hint, "copy_input", True):  # numba-cuda's: In and InOut copy in, Out does not
        device = numba_cuda.to_device(host, stream=stream or 0)
    else:
        device = numba_cuda.device_array_like(host, stream=stream or 0)  # type: ignore[no-untyped-call]  # numba-cuda's, unannotated
    # a write-back of its own (no implicit copy's pair): Out and InOut copy back, In keeps its copy alive
    back = (
        (lambda: device) if isinstance(hint, In) else functools.partial(device.copy_to_host, host, stream=stream or 0)
    )
    pairs.append((back, None))
    return device


def copy_back(pairs: list[tuple[Any, Any]], stream: Any = None) -> None:
    """Copy each device array back into its writable host array, each record into its host record (waits for
    the launch, as numba-cuda does)."""
    for host, device in pairs:
        if device is None:  # a cuda.In, Out or InOut's write-back (an In's keeps its device copy alive)
            host()
        elif isinstance(host, np.void):
            back = device.copy_to_host(stream=stream or 0)[0]
            for name in host.dtype.names or ():
                host[name] = back[name]
        elif host.flags.writeable:
            device.copy_to_host(host, stream=stream or 0)
