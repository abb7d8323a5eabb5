"""numba's side of typed pointers: a :class:`~overdub.types.PtrType` value is an LLVM pointer (numba's
``PointerModel``); ``p[i]`` loads and ``p[i] = v`` stores an element; an :class:`~overdub.intrinsics.Pointer`
argument is unboxed on the CPU as its address. :func:`load_element` and :func:`store_element` are the code
``unsafe_load`` and ``unsafe_store`` (:mod:`overdub.intrinsics`) generate too."""

from __future__ import annotations

import importlib
import operator

from numba.core import types
from numba.core.extending import NativeValue, models, register_model, unbox
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, CallableTemplate, infer_global, signature

from ..types import PtrType

register_model(PtrType)(models.PointerModel)


def element_address(context, builder, ptr_type, ptr, index_type, index):
    index = context.cast(builder, index, index_type, types.intp)
    return builder.gep(ptr, [index])


def load_element(context, builder, ptr_type, ptr, index_type, index):
    address = element_address(context, builder, ptr_type, ptr, index_type, index)
    return context.unpack_value(builder, ptr_type.dtype, address)


def store_element(context, builder, ptr_type, ptr, index_type, index, value_type, value):
    value = context.cast(builder, value, value_type, ptr_type.dtype)
    address = element_address(context, builder, ptr_type, ptr, index_type, index)
    context.pack_value(builder, ptr_type.dtype, value, address)


@infer_global(operator.getitem)
class _PtrGetItem(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 2 and isinstance(args[0], PtrType) and isinstance(args[1], types.Integer):
            return signature(args[0].dtype, args[0], types.unliteral(args[1]))


@infer_global(operator.setitem)
class _PtrSetItem(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 3 and isinstance(args[0], PtrType) and isinstance(args[1], types.Integer):
            return signature(types.none, args[0], types.unliteral(args[1]), args[0].dtype)


@lower_builtin(operator.getitem, PtrType, types.Integer)
def _ptr_getitem(context, builder, sig, args):
    return load_element(context, builder, sig.args[0], args[0], sig.args[1], args[1])


@lower_builtin(operator.setitem, PtrType, types.Integer, types.Any)
def _ptr_setitem(context, builder, sig, args):
    store_element(context, builder, sig.args[0], args[0], sig.args[1], args[1], sig.args[2], args[2])
    return context.get_dummy_value()


@unbox(PtrType)
def _unbox_pointer(typ, obj, c):
    address_obj = c.pyapi.object_getattr_string(obj, "address")
    address = c.pyapi.long_as_longlong(address_obj)
    c.pyapi.decref(address_obj)
    ptr = c.builder.inttoptr(address, c.context.get_value_type(typ))
    return NativeValue(ptr, is_error=c.pyapi.c_api_error())


# --- array views of a pointer: numba-cuda's carray and farray ---------------------------------------------


def _view_type(layout: str, ptr, shape, dtype):
    """The array type ``carray``/``farray`` (``layout`` "C"/"F") makes of these argument types, or None."""
    if not isinstance(ptr, types.CPointer) and ptr != types.voidptr:
        return None
    if dtype is None or isinstance(dtype, (types.NoneType, types.Omitted)):
        element = getattr(ptr, "dtype", None)
    elif isinstance(dtype, types.DTypeSpec):
        element = dtype.dtype
    else:
        return None
    if element is None or (isinstance(ptr, types.CPointer) and element != ptr.dtype):
        return None
    if isinstance(shape, types.Integer):
        ndim = 1
    elif isinstance(shape, (types.UniTuple, types.Tuple)) and all(isinstance(t, types.Integer) for t in shape.types):
        ndim = len(shape.types)
    else:
        return None
    return types.Array(element, ndim, "C" if layout == "C" else "F")


def carray(ptr, shape, dtype=None):
    """An array view in C order of the memory ``ptr`` points to (in kernels: numba-cuda's ``carray``)."""
    raise TypeError("an array view of a pointer is made in kernels only")


def farray(ptr, shape, dtype=None):
    """An array view in Fortran order of the memory ``ptr`` points to (in kernels: numba-cuda's ``farray``)."""
    raise TypeError("an array view of a pointer is made in kernels only")


def _register_view(view, layout: str) -> None:
    """The typing and lowering of ``view``, which the targets forward numba-cuda's ``carray``/``farray`` to:
    numba-cuda types those with an ``@overload`` inlined in numba's IR, which a call typed through overdub's
    dispatch never reaches (and a device function returning the array is what CUDA refuses). Lowered in the
    calling code, as numba's own."""

    class Template(CallableTemplate):
        key = view

        def generic(self):
            def typer(ptr, shape, dtype=None):
                return _view_type(layout, ptr, shape, dtype)

            return typer

    infer_global(view)(Template)
    for arity in (2, 3):
        lower_builtin(view, *[types.Any] * arity)(_lower_view)


def _lower_view(context, builder, sig, args):
    from numba.np.arrayobj import np_cfarray  # numba's lowering of its own carray/farray: (ptr, shape, ...)

    return np_cfarray(context, builder, sig, args)


_register_view(carray, "C")
_register_view(farray, "F")


def forwarded_views() -> list[tuple[object, object]]:
    """numba-cuda's ``carray`` and ``farray``, each with the view above that a target's root forwards it to
    (asked once numba-cuda is imported)."""
    numpy_support = importlib.import_module("numba.cuda.np.numpy_support")
    return [(numpy_support.carray, carray), (numpy_support.farray, farray)]
