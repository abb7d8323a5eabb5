"""numba-cuda's device arrays on the CPU target: host memory, which is the CPU target's device memory.

A numba-cuda program allocates device memory (``cuda.to_device``, ``cuda.device_array``), launches kernels on
it and copies results back (``d.copy_to_host()``). On the CPU target kernels read and write host memory, so a
device array is a numpy array -- kernels take it as one, with no copy -- of the class :class:`DeviceNDArray`,
which adds the methods numba-cuda's ``DeviceNDArray`` has: ``copy_to_host``, ``copy_to_device``, ``split``,
``is_c_contiguous``, ``bind``, ``getitem``/``setitem``, ``device_ctypes_pointer``, ``__cuda_array_interface__``.
What is copied is copied (``to_device`` of a host array, ``copy_to_host``), so a program that changes its host
array after ``to_device`` sees what it sees on a GPU. Pinned and mapped memory are plain host memory here.

Differences, by nature: the array is also a numpy array, so numpy's operators work on it (numba-cuda's refuse
most of them), and ``np.asarray(d)`` is a view rather than a copy to the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Shape = int | np.integer[Any] | Sequence[int]
Strides = int | Sequence[int] | None

__all__ = [
    "DeviceNDArray",
    "to_device",
    "device_array",
    "device_array_like",
    "pinned_array",
    "pinned_array_like",
    "mapped_array",
    "mapped_array_like",
    "managed_array",
    "pinned",
    "mapped",
    "is_cuda_array",
    "as_cuda_array",
    "from_cuda_array_interface",
    "In",
    "Out",
    "InOut",
]


class DeviceNDArray(np.ndarray):
    """A device array of the CPU target: a numpy array with the methods of numba-cuda's ``DeviceNDArray``.

    Slices and views are device arrays too; indexing one element returns a numpy scalar, as numba-cuda copies
    one element to the host."""

    overdub_plain_memory = True  # kernels capture a global one by reference (overdub.rewrite.substitute)
    stream: object = (
        0  # the default stream of its operations (numba-cuda's attribute); a class default for unpickled ones
    )

    def __array_finalize__(self, obj: object) -> None:
        self.stream = getattr(obj, "stream", 0)

    # -- copies between host and device -------------------------------------------------------------------
    def copy_to_host(self, ary: np.ndarray | None = None, stream: object = 0) -> np.ndarray:
        """A new host (numpy) array holding this array's elements, or ``ary`` filled with them."""
        if ary is None:
            return np.array(self, order="K", subok=False)
        _check_compatible(self, ary)
        np.copyto(ary, self, casting="no")
        return ary

    def copy_to_device(self, ary: npt.ArrayLike, stream: object = 0) -> None:
        """Copy ``ary`` (a host or device array of the same dtype and shape) into this array."""
        ary = np.asarray(ary)
        if ary.size == 0:
            return
        _check_contiguous(self)
        _check_compatible(self, ary)
        np.copyto(self, ary, casting="no")

    def split(self, section: int, stream: object = 0) -> Iterator[DeviceNDArray]:
        """Views of consecutive ``section`` elements (the last may be shorter) of a 1-d contiguous array."""
        if self.ndim != 1:
            raise ValueError("only support 1d array")
        if self.strides[0] != self.dtype.itemsize:
            raise ValueError("only support unit stride")
        for begin in range(0, math.ceil(self.size / section) * section, section):
            view = self[begin : begin + section].view(DeviceNDArray)
            view.stream = stream or self.stream
            yield view

    def bind(self, stream: object = 0) -> DeviceNDArray:
        """The same memory, with ``stream`` as the default stream of its operations."""
        view = self.view(DeviceNDArray)
        view.stream = stream
        return view

    def getitem(self, item: Any, stream: object = 0) -> Any:
        """``self[item]`` (numba-cuda's form with a stream)."""
        return self[item]

    def setitem(self, key: Any, value: Any, stream: object = 0) -> None:
        """``self[key] = value`` (numba-cuda's form with a stream)."""
        self[key] = value

    # -- numba-cuda's shape methods, which take a stream too ------------------------------------------------
    def ravel(self, order: Any = "C", stream: object = 0) -> DeviceNDArray:
        """A flattened view; numba-cuda refuses an array that needs a copy for it, as here."""
        flat = np.ndarray.ravel(self, order=order)
        if not np.shares_memory(flat, self) and self.size > 1:
            raise NotImplementedError("operation requires copying")
        return flat.view(DeviceNDArray)

    def squeeze(self, axis: Any = None, stream: object = 0) -> DeviceNDArray:
        return np.ndarray.squeeze(self, axis=axis).view(DeviceNDArray)

    # -- what numba-cuda's device arrays tell about themselves ----------------------------------------------
    def is_c_contiguous(self) -> bool:
        return bool(self.flags.c_contiguous)

    def is_f_contiguous(self) -> bool:
        return bool(self.flags.f_contiguous)

    @property
    def alloc_size(self) -> int:
        """The bytes the array spans (numba-cuda: the size of its allocation)."""
        if self.size == 0:
            return 0
        return int(sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides)) + self.itemsize)

    @property
    def device_ctypes_pointer(self) -> ctypes.c_void_p:
        """The address of the first element (memory kernels of the CPU target read)."""
        return ctypes.c_void_p(self.ctypes.data)

    @property
    def gpu_data(self) -> DeviceNDArray:
        """The memory behind the array (numba-cuda: a ``MemoryPointer``): here the array itself."""
        return self

    def as_cuda_arg(self) -> DeviceNDArray:
        return self

    @property
    def __cuda_array_interface__(self) -> dict[str, object]:
        """The CUDA array interface as numba-cuda's device arrays give it; its address is host memory, which is
        the device memory of the CPU target (the one kernels here read: ``od.pointer``, a ``CPointer``)."""
        return {
            "shape": self.shape,
            "strides": None if self.flags.c_contiguous else self.strides,
            "data": (self.ctypes.data, not self.flags.writeable),
            "typestr": self.dtype.str,
            "stream": None,
            "version": 3,
        }

    def get_ipc_handle(self) -> None:
        raise NotImplementedError("IPC handles share GPU memory between processes: the CPU target has none")

    def __repr__(self) -> str:
        return f"<overdub.cuda device array (CPU target) {np.ndarray.__repr__(self.view(np.ndarray))}>"


def _check_compatible(a: np.ndarray, b: np.ndarray) -> None:
    """numba-cuda's rule for a copy: the same dtype, and the same shape once dimensions of one are dropped."""
    if a.dtype != b.dtype:
        raise TypeError(f"incompatible dtype: {a.dtype} vs. {b.dtype}")
    if a.squeeze().shape != b.squeeze().shape:
        raise ValueError(f"incompatible shape: {a.shape} vs. {b.shape}")


def _check_contiguous(ary: np.ndarray) -> None:
    core = ary[tuple(0 if stride == 0 else slice(None) for stride in ary.strides)] if ary.size else ary
    if not (core.flags.c_contiguous or core.flags.f_contiguous):
        raise ValueError(
            "Array contains non-contiguous buffer and cannot be transferred as a single memory region. "
            "Please ensure contiguous buffer with numpy .ascontiguousarray()"
        )


def _empty(shape: Shape, dtype: npt.DTypeLike, strides: Strides, order: Any) -> DeviceNDArray:
    """numba-cuda's allocation rule: an int or a sequence of ints (no floats), strides in bytes or none."""
    if isinstance(shape, (float, np.floating)) or (
        not isinstance(shape, (int, np.integer)) and any(isinstance(n, (float, np.floating)) for n in shape)
    ):
        raise TypeError("shape must be an integer or tuple of integers")
    dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    element = np.dtype(dtype)
    if strides is None or strides == ():
        return np.empty(dims, element, order=order).view(DeviceNDArray)
    steps = (strides,) if isinstance(strides, int) else tuple(strides)
    span = sum((n - 1) * s for n, s in zip(dims, steps)) + element.itemsize if all(dims) else 0
    buffer = np.empty(max(span, 0), np.uint8)
    return np.ndarray(dims, element, buffer=buffer, strides=steps).view(DeviceNDArray)


def _like(ary: np.ndarray) -> tuple[tuple[int, ...], np.dtype[Any], tuple[int, ...] | None, str]:
    """(shape, dtype, strides, order) of a new contiguous array like ``ary`` (numba-cuda's ``*_like``)."""
    order = "F" if ary.flags["F_CONTIGUOUS"] and not ary.flags["C_CONTIGUOUS"] else "C"
    if ary.flags["C_CONTIGUOUS"] or ary.flags["F_CONTIGUOUS"] or ary.ndim <= 1:
        return ary.shape, ary.dtype, None, order
    strides, stride = [0] * ary.ndim, ary.dtype.itemsize  # the same order of strides, without the gaps
    for axis, _ in sorted(enumerate(ary.strides), key=lambda pair: pair[1]):
        strides[axis] = stride
        stride *= ary.shape[axis]
    return ary.shape, ary.dtype, tuple(strides), order


def device_array(
    shape: Shape, dtype: npt.DTypeLike = np.float64, strides: Strides = None, order: str = "C", stream: object = 0
) -> DeviceNDArray:
    """An uninitialised device array (``numpy.empty``)."""
    array = _empty(shape, dtype, strides, order)
    array.stream = stream
    return array


def device_array_like(ary: np.ndarray, stream: object = 0) -> DeviceNDArray:
    shape, dtype, strides, order = _like(ary)
    return device_array(shape, dtype, strides, order, stream)


def to_device(obj: Any, stream: object = 0, copy: bool = True, to: DeviceNDArray | None = None) -> Any:
    """A device array holding a copy of ``obj`` (an array, anything ``numpy.asarray`` takes, or a record);
    ``obj`` itself when it is a device array already; with ``to``, ``obj`` copied into ``to``."""
    if to is not None:
        if copy:
            to.copy_to_device(obj, stream=stream)
        return to
    if isinstance(obj, DeviceNDArray):
        return obj
    if isinstance(obj, np.void):  # a record: a device record, written and read by kernels in place
        return np.array(obj, dtype=obj.dtype).view(DeviceNDArray)[()]
    host = np.asarray(obj)
    _check_contiguous(host)
    device = device_array_like(host, stream)
    if copy:
        device.copy_to_device(host, stream=stream)
    return device


def managed_array(
    shape: Shape,
    dtype: npt.DTypeLike = np.float64,
    strides: Strides = None,
    order: str = "C",
    stream: object = 0,
    attach_global: bool = True,
) -> DeviceNDArray:
    """Memory the host and kernels both use: any device array of the CPU target."""
    return device_array(shape, dtype, strides, order, stream)


def mapped_array(
    shape: Shape,
    dtype: npt.DTypeLike = np.float64,
    strides: Strides = None,
    order: str = "C",
    stream: object = 0,
    portable: bool = False,
    wc: bool = False,
) -> DeviceNDArray:
    """Host memory kernels use directly: any device array of the CPU target."""
    return device_array(shape, dtype, strides, order, stream)


def mapped_array_like(ary: np.ndarray, stream: object = 0, portable: bool = False, wc: bool = False) -> DeviceNDArray:
    return device_array_like(ary, stream)


def pinned_array(
    shape: Shape, dtype: npt.DTypeLike = np.float64, strides: Strides = None, order: str = "C"
) -> np.ndarray:
    """A host (numpy) array; pinning changes nothing on the CPU target."""
    return _empty(shape, dtype, strides, order).view(np.ndarray)


def pinned_array_like(ary: np.ndarray) -> np.ndarray:
    shape, dtype, strides, order = _like(ary)
    return pinned_array(shape, dtype, strides, order)


@contextlib.contextmanager
def pinned(*arylist: np.ndarray) -> Iterator[None]:
    """Pin host arrays for the block: nothing to do on the CPU target."""
    yield


@contextlib.contextmanager
def mapped(*arylist: np.ndarray, stream: object = 0) -> Iterator[object]:
    """Host arrays as device arrays for the block: views of the same memory (one array, or a list)."""
    views = [np.asarray(ary).view(DeviceNDArray) for ary in arylist]
    yield views[0] if len(views) == 1 else views


def is_cuda_array(obj: object) -> bool:
    """Does ``obj`` describe device memory? Device arrays of the CPU target and ``__cuda_array_interface__``
    objects do."""
    return hasattr(obj, "__cuda_array_interface__")


def as_cuda_array(obj: object, sync: bool = True) -> DeviceNDArray:
    """A device array viewing ``obj``'s memory, without a copy: a device array of the CPU target, or any host
    (numpy) array, whose memory is the CPU target's device memory."""
    if isinstance(obj, np.ndarray):
        return obj.view(DeviceNDArray)
    raise TypeError(f"{type(obj).__name__} is not memory the CPU target's kernels use: pass a numpy array")


def from_cuda_array_interface(desc: dict[str, Any], owner: object = None, sync: bool = True) -> DeviceNDArray:
    """A device array over the memory ``desc`` describes: on the CPU target, host memory (what a device array of
    the CPU target's ``__cuda_array_interface__`` gives)."""
    if owner is not None and isinstance(owner, np.ndarray):
        return owner.view(DeviceNDArray)
    dtype, shape = np.dtype(desc["typestr"]), tuple(desc["shape"])
    strides = desc.get("strides")
    size = (
        sum((n - 1) * s for n, s in zip(shape, strides)) + dtype.itemsize
        if strides
        else math.prod(shape) * dtype.itemsize
    )
    buffer = (ctypes.c_byte * max(size, 0)).from_address(desc["data"][0])
    return np.ndarray(shape, dtype, buffer=buffer, strides=strides).view(DeviceNDArray)


def In(ary: np.ndarray) -> np.ndarray:
    """numba-cuda's hint that a host array is only read by the kernel: a copy in the CPU target's memory, as
    numba-cuda copies it to the GPU and never back -- what the kernel writes there stays there."""
    return np.array(ary, copy=True).view(DeviceNDArray)


def Out(ary: np.ndarray) -> np.ndarray:
    """numba-cuda's hint that a host array is only written by the kernel: the array itself."""
    return ary


def InOut(ary: np.ndarray) -> np.ndarray:
    """numba-cuda's hint that a host array is read and written by the kernel: the array itself."""
    return ary
