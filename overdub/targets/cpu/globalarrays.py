"""Global numpy arrays in CPU-target kernels: read live, through their pointer, as numba-cuda reads a global
device array.

numba's CPU compiler freezes a global numpy array into the code as a constant copy: an in-place change of
the array (``TABLE[0] = 5``) was never seen by a kernel compiled before it -- silently stale -- while numba-cuda
captures a global device array by pointer, so a program relying on that (numba-cuda's "device array capture"
example) gave other answers on the CPU target. The CPU target captures a global numpy array by reference
instead: the rewrite (:func:`overdub.rewrite.substitute`) hands numba a :class:`GlobalArray` for it, whose
constant is the array's current data pointer, shape and strides, and every launch reads what the array holds
then. Rebinding the global still recompiles (it is an edge); the edge holds the array, so its memory lives as
long as the code reading it. Such code holds an address of this process, so numba marks it (a "dynamic
global") and the disk cache does not store it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba.core import types
from numba.core.datamodel import models
from numba.core.extending import register_model, typeof_impl
from numba.core.imputils import lower_constant

from ...runtime import runtime

if TYPE_CHECKING:
    from llvmlite import ir
    from numba.core.base import BaseContext


class GlobalArray:
    """A global numpy array a CPU-target kernel reads, captured by reference (one per array, interned)."""

    __slots__ = ("array", "__weakref__")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class GlobalArrayType(types.Array):
    """numba's type of a :class:`GlobalArray`: an array (everything numba does with arrays applies) whose
    constant is a reference to the global's memory, not a copy."""

    def __init__(self, dtype: types.Type, ndim: int, layout: str, readonly: bool = False) -> None:
        super().__init__(dtype, ndim, layout, readonly=readonly)  # type: ignore[call-overload]  # numba's stub: layout a Literal
        self.name = f"global {self.name}"

    @property
    def key(self) -> tuple[object, ...]:  # type: ignore[override]  # numba's stub fixes Array's key at 5 items
        return ("global", *super().key)

    def copy(  # type: ignore[override]  # numba's stub of Array.copy lacks addrspace and aligned, which numba passes
        self,
        dtype: types.Type | None = None,
        ndim: int | None = None,
        layout: str | None = None,
        readonly: bool | None = None,
        addrspace: int | None = None,
        aligned: bool | None = None,
    ) -> types.Array:
        """The global array read-only (numba types every global array so): still the global; views and slices
        of it are plain arrays (numba builds them from the array's fields)."""
        if dtype is None and ndim is None and layout is None and addrspace is None and aligned is None:
            return GlobalArrayType(
                self.dtype, self.ndim, self.layout, not self.mutable if readonly is None else readonly
            )
        return types.Array(  # type: ignore[call-overload, no-any-return]  # numba's stub: layout a Literal
            self.dtype if dtype is None else dtype,
            self.ndim if ndim is None else ndim,
            self.layout if layout is None else layout,
            readonly=not self.mutable if readonly is None else readonly,
            aligned=self.aligned if aligned is None else aligned,
        )


register_model(GlobalArrayType)(models.ArrayModel)


@typeof_impl.register(GlobalArray)
def _typeof_global_array(value: GlobalArray, c: object) -> GlobalArrayType:
    """A host array is read-only wherever its reference is met -- a global, an item of a global tuple, a
    default -- as numba types a global array (numba-cuda holds it in constant memory); a device array of
    overdub.cuda's CPU target is typed as numba-cuda types a device array held so (an item of a tuple writable)."""
    array_type = typeof_impl(value.array, c)
    device = getattr(value.array, "overdub_plain_memory", False)
    readonly = not array_type.mutable or not device
    return GlobalArrayType(array_type.dtype, array_type.ndim, array_type.layout, readonly=readonly)


@lower_constant(GlobalArrayType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _global_array_constant(
    context: BaseContext, builder: ir.IRBuilder, ty: GlobalArrayType, pyval: GlobalArray
) -> ir.Value:
    """The array's fields, its data pointer a dynamic address (read each launch; never cached to disk)."""
    array = pyval.array
    data = context.add_dynamic_addr(builder, array.ctypes.data, info=f"global array at {array.ctypes.data:#x}")  # type: ignore[no-untyped-call]  # numba's is unannotated
    intp = context.get_value_type(types.intp)  # type: ignore[no-untyped-call]  # numba's is unannotated
    result = context.make_array(ty)(context, builder)  # type: ignore[no-untyped-call]  # numba's is unannotated
    context.populate_array(  # type: ignore[no-untyped-call]  # numba's is unannotated
        result,
        data=builder.bitcast(data, context.get_data_type(ty.dtype).as_pointer()),  # type: ignore[no-untyped-call]  # numba's is unannotated
        shape=[intp(n) for n in array.shape],
        strides=[intp(s) for s in array.strides],
        itemsize=intp(array.itemsize),
        meminfo=None,
    )
    return result._getvalue()


def global_array(array: np.ndarray) -> GlobalArray:
    """The reference a kernel compiled for the CPU target reads ``array`` through (one per array while it
    lives: numba sees one constant per array)."""
    key = ("cpu global array", id(array))
    found = runtime.proxies.get(key)
    if not isinstance(found, GlobalArray) or found.array is not array:
        found = runtime.proxies[key] = GlobalArray(array)
    return found
