"""The CUDA target: numba-cuda lowers the rewritten kernel to NVVM IR, libNVVM to PTX, the driver loads it.

Callees are compiled with ``compile_cuda`` for an explicit compute capability and registered with the CUDA
target context directly, which is what lets kernels calling generic device methods compile to PTX on a
machine with no GPU (numba's own device functions ask the current device for its compute capability).

The launcher does only what it must per launch: marshal each argument with a packer chosen at compile time
for its type (a numba array is its exploded fields: meminfo, parent, nitems, itemsize, data, shape...,
strides...), and call ``cuda.core``'s ``launch``. Host (numpy) arrays are rejected with a message saying
what to pass instead: copying silently in and out would hide a transfer on every launch.
"""
from __future__ import annotations

import functools
import threading

import numpy as np
from numba import cuda as numba_cuda
from numba.core import types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.utils import pysignature

from .. import bridge
from ..context import CUDA, TargetRoot
from ..intrinsics import Pointer, cuprintln

DEFAULT_CC = (9, 0)


def _fold(pyfunc, argtypes: tuple, kws: dict) -> tuple[tuple, object]:
    """Positional argument types for a call of ``pyfunc`` with keywords and defaults resolved (numba's
    ``Omitted`` for a default), and the Python signature lowering folds the call's arguments with."""
    from numba.core.typing.templates import fold_arguments
    pysig = pysignature(pyfunc)
    folded = fold_arguments(pysig, argtypes, kws,
                            lambda index, param, value: value,
                            lambda index, param, default: types.Omitted(default),
                            lambda index, param, values: types.StarArgTuple(tuple(values)))
    return tuple(folded), pysig


# --- argument packers -----------------------------------------------------------------------------------

def _array_packer(ty: types.Array):
    ndim, itemsize = ty.ndim, ty.dtype.bitwidth // 8 if hasattr(ty.dtype, "bitwidth") else None

    def pack(value, out):
        interface = value.__cuda_array_interface__
        shape = interface["shape"]
        strides = interface["strides"]
        size = 1
        for extent in shape:
            size *= extent
        item = itemsize or np.dtype(interface["typestr"]).itemsize
        if strides is None:       # C-contiguous
            strides, step = [], item
            for extent in reversed(shape):
                strides.append(step)
                step *= extent
            strides.reverse()
        out += (0, 0, size, item, interface["data"][0], *shape, *strides)
    return pack


def _pointer_pack(value, out):
    out.append(value.address)


def _scalar_packer(ty):
    convert = np.dtype(str(ty) if ty != types.boolean else "bool").type

    def pack(value, out):
        out.append(convert(value))
    return pack


def packer_for(ty):
    """How a launch argument of numba type ``ty`` becomes kernel parameters."""
    if isinstance(ty, types.Array):
        return _array_packer(ty)
    if isinstance(ty, bridge.PtrType):
        return _pointer_pack
    if isinstance(ty, (types.Integer, types.Float, types.Boolean)):
        return _scalar_packer(ty)
    if isinstance(ty, types.Complex):
        part = _scalar_packer(ty.underlying_float)

        def pack(value, out):
            part(value.real, out)
            part(value.imag, out)
        return pack
    raise TypeError(f"overdub cannot pass an argument of type {ty} to a CUDA kernel")


# --- launcher -------------------------------------------------------------------------------------------

_streams: dict[int, object] = {}


def _stream_handle(stream) -> int:
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    handle = getattr(stream, "ptr", None)               # cupy
    if handle is None:
        handle = getattr(stream, "handle", None)        # numba
        handle = getattr(handle, "value", handle)
    if handle is None:
        raise TypeError(f"stream= takes a cupy, numba or cuda.core stream, not {type(stream).__name__}")
    return int(handle)


def _stream_for(stream):
    """The ``cuda.core`` stream for a cupy, numba or cuda.core stream (wrappers cached by handle)."""
    from cuda.core import Device, Stream
    if isinstance(stream, Stream):
        return stream
    handle = _stream_handle(stream)
    wrapped = _streams.get(handle)
    if wrapped is None:
        wrapped = _streams[handle] = Device().create_stream(_ForeignStream(handle))
    return wrapped


class _ForeignStream:
    """A stream handle in the ``__cuda_stream__`` protocol (version 0)."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@functools.lru_cache(maxsize=256)
def _launch_config(blocks, threads, shmem):
    from cuda.core import LaunchConfig
    return LaunchConfig(grid=blocks, block=threads, shmem_size=shmem)


class CUDALauncher:
    """A compiled kernel, loaded on first launch, and the packers for its arguments."""

    __slots__ = ("library", "packers", "_kernel", "_lock", "_default_stream")

    def __init__(self, library, argtypes):
        self.library = library
        self.packers = tuple(packer_for(t) for t in argtypes)
        self._kernel = None
        self._default_stream = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._kernel is None:
                from cuda.core import Device
                Device().set_current()
                self._kernel = self.library.get_cufunc().kernel
                self._default_stream = Device().default_stream
        return self._kernel

    def launch(self, args, blocks, threads, shmem, stream):
        from cuda.core import launch
        kernel = self._kernel or self._load()
        params = []
        for pack, value in zip(self.packers, args):
            pack(value, params)
        s = self._default_stream if stream is None else _stream_for(stream)
        launch(s, _launch_config(blocks, threads, shmem), kernel, *params)


# --- the target -----------------------------------------------------------------------------------------

class CUDATarget:
    base = CUDA
    compile_lock = global_compiler_lock

    def __init__(self, cc: tuple[int, int]):
        self.cc = tuple(cc)
        self.name = f"cuda (sm_{self.cc[0]}{self.cc[1]})"
        self.root = TargetRoot(f"cuda-sm_{self.cc[0]}{self.cc[1]}", self)
        self.root.forward(print, cuprintln)

    def typeof(self, value):
        if isinstance(value, np.ndarray):
            raise TypeError("a numpy array lives in host memory: pass a cupy array, a numba device array "
                            "(numba.cuda.to_device) or any __cuda_array_interface__ object to a CUDA kernel")
        if isinstance(value, Pointer) and not value.device:
            raise TypeError(f"{value!r} points to host memory: take od.pointer of a device array instead")
        from numba.cuda.typing.typeof import Purpose, typeof
        return typeof(value, Purpose.argument)

    def compile_method(self, func, typing_context, argtypes, kws):
        from numba.cuda.compiler import compile_cuda
        from numba.cuda.typing.templates import signature
        folded, pysig = _fold(func, argtypes, kws)
        cres = compile_cuda(func, None, folded, cc=self.cc, nvvm_options={"opt": 3})
        impl_key = ("overdub", cres.fndesc.mangled_name)
        cres.target_context.insert_user_function(impl_key, cres.fndesc, [cres.library])
        sig = signature(cres.signature.return_type, *folded).replace(pysig=pysig)
        return sig, impl_key, cres

    def compile_kernel(self, func, argtypes):
        return CUDALauncher(self.kernel_library(func, argtypes), argtypes)

    def kernel_library(self, func, argtypes):
        """The code library of a kernel: PTX (``get_asm_str``), LLVM IR (``get_llvm_str``), SASS."""
        from numba.cuda.compiler import compile_cuda, kernel_fixup
        from numba.cuda.cudadrv import nvvm
        cres = compile_cuda(func, types.void, tuple(argtypes), cc=self.cc, nvvm_options={"opt": 3})
        library = cres.library
        entry = library.get_function(cres.fndesc.llvm_func_name)
        library._entry_name = cres.fndesc.llvm_func_name
        kernel_fixup(entry, debug=False)
        nvvm.set_launch_bounds(entry, None)
        return library

    def synchronize(self):
        from cuda.core import Device
        Device().sync()


@functools.lru_cache(maxsize=None)
def target_for(cc: tuple[int, int]) -> CUDATarget:
    """The CUDA target for one compute capability (each keeps its own kernels)."""
    return CUDATarget(cc)


def _device_cc() -> tuple[int, int]:
    try:
        if numba_cuda.is_available():
            return tuple(numba_cuda.get_current_device().compute_capability)
    except Exception:
        pass
    return DEFAULT_CC


TARGET = target_for(_device_cc())
