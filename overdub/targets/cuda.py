"""The CUDA target: numba-cuda lowers the rewritten kernel to NVVM IR, libNVVM to PTX, the driver loads it.

Callees are compiled with ``compile_cuda`` for an explicit compute capability and registered with the CUDA
target context directly, which is what lets kernels calling generic device methods compile to PTX on a
machine with no GPU (numba's own device functions ask the current device for its compute capability).

A launch does only what it must: check the guards, marshal each argument into the kernel's parameter
slots (a numba array is its exploded fields: meminfo, parent, nitems, itemsize, data, shape..., strides...)
and call the driver's ``cuLaunchKernel``. Where the native extension is built, all of it runs in C
(``_fastlaunch.c``: measured faster than cupy's RawKernel and within a few percent of ``cuda.core``'s
``launch``); otherwise :mod:`overdub.launch` generates the same steps in Python from ``launch_code``.

Host (numpy) arrays are rejected with a message saying what to pass instead: copying silently in and out
would hide two transfers in every launch.
"""
from __future__ import annotations

import ctypes
import functools
import struct
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


# --- argument marshalling -------------------------------------------------------------------------------
# Every kernel parameter gets an 8-byte slot of one buffer. Per kernel, a marshalling function is generated
# from the argument types: one struct.pack_into writing every slot, no loop and no per-argument calls for
# cupy arrays, pointers and scalars. The driver gets an array of pointers to the slots, built once.

_SLOT = {"int8": "b7x", "int16": "h6x", "int32": "i4x", "int64": "q", "uint8": "B7x", "uint16": "H6x",
         "uint32": "I4x", "uint64": "Q", "float16": "e6x", "float32": "f4x", "float64": "d", "bool": "?7x"}


def _cupy_ndarray():
    try:
        import cupy
        return cupy.ndarray
    except Exception:
        return None


def _interface_fields(value, itemsize):
    """numba's exploded array fields for any ``__cuda_array_interface__`` object."""
    interface = value.__cuda_array_interface__
    shape = interface["shape"]
    strides = interface["strides"] or _c_strides(shape, itemsize)
    size = 1
    for extent in shape:
        size *= extent
    return (0, 0, size, itemsize, interface["data"][0], *shape, *strides)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def parameter_slots(ty) -> tuple[str, str]:
    """(struct format of its slots, Python expression of its values over ``{v}``) for an argument of numba
    type ``ty``. An array is numba's exploded fields: meminfo, parent, nitems, itemsize, data, shape...,
    strides... (in bytes); cupy's attributes are read directly, cheaper than its interface dict."""
    if isinstance(ty, types.Array):
        itemsize = np.dtype(str(ty.dtype)).itemsize
        cupy_fields = f"(0, 0, {{v}}.size, {itemsize}, {{v}}.data.ptr, *{{v}}.shape, *{{v}}.strides)"
        return "q" * (5 + 2 * ty.ndim), (f"*({cupy_fields} if type({{v}}) is cupy_ndarray "
                                         f"else interface_fields({{v}}, {itemsize}))")
    if isinstance(ty, bridge.PtrType):
        return "Q", "{v}.address"
    if isinstance(ty, (types.Integer, types.Float, types.Boolean)):
        return _SLOT["bool" if isinstance(ty, types.Boolean) else str(ty)], "{v}"
    if isinstance(ty, types.Complex):
        return _SLOT[str(ty.underlying_float)] * 2, "{v}.real, {v}.imag"
    raise TypeError(f"overdub cannot pass an argument of type {ty} to a CUDA kernel")


def marshal_values(argtypes, names) -> tuple[struct.Struct, str]:
    """The parameter layout of a kernel and the Python expression of its slot values over ``names``."""
    formats, values = [], []
    for name, ty in zip(names, argtypes):
        fmt, expr = parameter_slots(ty)
        formats.append(fmt)
        values.append(expr.format(v=name))
    return struct.Struct("<" + "".join(formats)), ", ".join(values)


# --- streams --------------------------------------------------------------------------------------------

def stream_handle(stream) -> int:
    """The CUstream handle of a cupy, numba or cuda.core stream (anything speaking ``__cuda_stream__``)."""
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    handle = getattr(stream, "ptr", None)               # cupy
    if handle is None:
        handle = getattr(stream, "handle", None)        # numba
        handle = getattr(handle, "value", handle)
    if handle is None:
        raise TypeError(f"stream= takes a cupy, numba or cuda.core stream, not {type(stream).__name__}")
    return int(handle)


_streams: dict[int, object] = {}


def driver_stream(stream):
    """The driver's CUstream for a user stream; cached by handle."""
    from cuda.bindings.driver import CUstream
    handle = stream_handle(stream)
    wrapped = _streams.get(handle)
    if wrapped is None:
        wrapped = _streams[handle] = CUstream(handle)
    return wrapped


# --- launcher -------------------------------------------------------------------------------------------

class CUDALauncher:
    """A compiled kernel (loaded on first launch) and its parameter buffer.

    ``launch_code`` gives the launch path the statements that marshal the arguments into the buffer with
    one ``struct.pack_into`` and enqueue the kernel with one driver call.
    """

    def __init__(self, library, argtypes):
        self.library = library
        self.argtypes = tuple(argtypes)
        self.function = None
        self.lock = threading.Lock()

    def _load(self):
        with self.lock:
            if self.function is None:
                from cuda.bindings.driver import cuKernelGetFunction
                from cuda.core import Device
                Device().set_current()
                kernel = self.library.get_cufunc().kernel._handle
                err, function = cuKernelGetFunction(kernel)     # the context's function: no lookup per launch
                self.function = function if not err else kernel
        return self.function

    def launch_code(self, names: list[str]) -> tuple[list[str], dict]:
        from cuda.bindings.driver import CUstream, cuLaunchKernel
        layout, values = marshal_values(self.argtypes, names)
        buffer = ctypes.create_string_buffer(max(layout.size, 8))
        base = ctypes.addressof(buffer)
        slots = (ctypes.c_void_p * max(layout.size // 8, 1))(*[base + 8 * i for i in range(layout.size // 8)])
        statements = [
            "hstream = null_stream if stream is None else driver_stream(stream)",
            "with lock:    # one parameter buffer per kernel; the driver copies it during the call",
            f"    pack_into(buffer, 0{', ' if values else ''}{values})",
            "    err, = cu_launch(function, gx, gy, gz, tx, ty, tz, shmem, hstream, slot_addresses, 0)",
            "if err:",
            "    launch_failed(err)",
        ]
        namespace = {"null_stream": CUstream(0), "driver_stream": driver_stream, "lock": self.lock,
                     "pack_into": layout.pack_into, "buffer": buffer, "slots": slots,
                     "slot_addresses": ctypes.addressof(slots), "cu_launch": cuLaunchKernel,
                     "function": self.function or self._load(), "launch_failed": self._failed,
                     "cupy_ndarray": _cupy_ndarray(), "interface_fields": _interface_fields}
        return statements, namespace

    def _failed(self, err):
        raise RuntimeError(f"launching {self.library.name}: {err!r}")

    def native_launch(self, kernel, args, argtypes):
        """The native launch function for ``kernel`` and arguments like ``args`` (see _fastlaunch.c), or None
        where the extension is not built or an argument is of a kind it does not marshal."""
        if _fastlaunch is None:
            return None
        specs = [_native_spec(value, ty) for value, ty in zip(args, argtypes)]
        checks = kernel.guard.native_checks()
        if None in specs or checks is None:
            return None
        function = self.function or self._load()
        return _fastlaunch.Launcher(kernel, checks, specs, int(function), _cu_launch_kernel_address(),
                                    stream_handle)


try:
    from .. import _fastlaunch
except ImportError:          # built without a C compiler: the generated Python launch path serves
    _fastlaunch = None


@functools.lru_cache(maxsize=None)
def _cu_launch_kernel_address() -> int:
    return ctypes.cast(ctypes.CDLL("libcuda.so.1").cuLaunchKernel, ctypes.c_void_p).value


def _native_spec(value, ty):
    """How _fastlaunch guards and marshals one argument, or None when it cannot."""
    if isinstance(ty, (types.Integer, types.Float, types.Boolean)) and ty != types.float16:
        return ("s", _SLOT["bool" if isinstance(ty, types.Boolean) else str(ty)][0])
    if isinstance(ty, bridge.PtrType) and isinstance(value, Pointer):
        return ("p", value.dtype, value.device)
    cupy_ndarray = _cupy_ndarray()
    if isinstance(ty, types.Array) and cupy_ndarray is not None and type(value) is cupy_ndarray:
        return ("a", value.dtype, ty.ndim, value.itemsize, ty.layout)
    return None


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
