"""A kernel numba-cuda-mlir compiled, and its launch: through numba-cuda-mlir's own dispatcher, which
marshals arguments by its parameter ABI (an MLIR memref's: a 1-D array is five parameters there, where
numba-cuda passes seven) and loads the cubin it linked; a typed pointer is passed as its address, which it
takes for a pointer parameter, and a struct's value as a named tuple of its fields. The launch function overdub generates checks the kernel's validity and the
arguments' guards first, as on every target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numba.np.numpy_support import as_dtype

from ...intrinsics import Pointer
from ...launchconfig import stream_handle
from ...types import StructType
from .. import launchfn
from .translate import shadow

if TYPE_CHECKING:
    from ...arguments import Argument
    from ...compiler import Kernel
    from .. import LaunchFunction


@dataclass(frozen=True)
class MLIRCode:
    """A kernel's code on this target: numba-cuda-mlir's dispatcher and its compile result (PTX, MLIR)."""

    dispatcher: Any  # numba-cuda-mlir's MLIRDispatcher, compiled for argtypes
    cres: Any  # its CompileResult
    argtypes: tuple[object, ...]  # numba's types


class MLIRLauncher:
    """Launches one compiled kernel with numba-cuda-mlir's dispatcher."""

    def __init__(self, code: MLIRCode) -> None:
        self.code = code
        self.cooperative = bool(code.cres.metadata.get("use_cooperative", False))

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        body = ["enqueue(args, (gx, gy, gz), (tx, ty, tz), shmem, stream)"]
        return launchfn.generate(kernel, described, body, {"enqueue": self._enqueue})

    def _enqueue(self, args: tuple[object, ...], grid: object, block: object, shmem: int, stream: object) -> None:
        handle = 0 if stream is None else stream_handle(stream)
        self.code.dispatcher[grid, block, handle, shmem](*map(_passed, args))

    def suggested_block_size(self, shmem: int = 0) -> int:
        return 256

    def co_resident_blocks(self, threads: int, shmem: int = 0) -> int:
        return int(self.code.cres._max_cooperative_grid_blocks(threads, shmem))


def _passed(arg: object) -> object:
    """A launch argument as numba-cuda-mlir's dispatcher takes it: a typed pointer as its address, a struct's
    value as its shadow named tuple of numpy scalars of the fields' types (which its typeof types exactly)."""
    if type(arg) is Pointer:
        return arg.address
    struct_type = getattr(type(arg), "_numba_type_", None)
    if isinstance(struct_type, StructType):
        fields = (_field(getattr(arg, name), ftype) for name, ftype in struct_type.fields)
        return shadow(struct_type)(*fields)
    return arg


def _field(value: object, ftype: Any) -> object:
    if isinstance(ftype, StructType):
        return _passed(value)
    return as_dtype(ftype).type(value)
