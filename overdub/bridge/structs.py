"""The typing bridge for structs: what numba needs to compile code over :class:`~overdub.types.StructType` values.

* the data model: an LLVM struct of the fields, by value (numba's ``StructModel``), whose memory layout is
  the aligned numpy dtype of the struct's arrays, so ``ps[i]`` and ``ps[i] = c`` of an array of a struct are
  numba's own array loads and stores of it;
* field reads ``c.r``;
* struct classes as values in kernels (:class:`StructClassType`), whose call is the constructor: the class
  binds and types the call (``StructMeta.__overdub_bind__``: the rule the host uses too), this module lowers it;
* host values as constants (a struct value read from a module global) and as CPU kernel arguments (unboxed
  field by field).

On CUDA a struct parameter is its fields, one kernel parameter each (numba-cuda flattens a ``StructModel``
argument); :mod:`overdub.arguments` packs them.
"""

from __future__ import annotations

from numba.core import cgutils, errors, types
from numba.core.extending import NativeValue, models, register_model, typeof_impl, unbox
from numba.core.imputils import lower_builtin, lower_constant, lower_getattr_generic, lower_setattr_generic
from numba.core.typing.templates import AttributeTemplate, infer_getattr, signature

from .. import postimport, world
from ..types import LatticeMeta, StructType

__all__ = ["StructClassType"]


@register_model(StructType)
class _StructModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, list(fe_type.fields))


@infer_getattr
class _StructFields(AttributeTemplate):
    key = StructType

    def generic_resolve(self, typ, attr):
        if typ.definition is not None:
            world.consult(typ.definition)  # code reading fields depends on the class statement
        return typ.field_type(attr)


@lower_getattr_generic(StructType)
def _lower_field(context, builder, typ, value, attr):
    return getattr(cgutils.create_struct_proxy(typ)(context, builder, value=value), attr)


@lower_setattr_generic(StructType)
def _refuse_field_assignment(context, builder, sig, args, attr):
    """numba types ``c.r = x`` through the field reads' template, so the refusal comes at lowering (numba wraps
    it with the kernel's source line)."""
    struct_type = sig.args[0]
    raise errors.TypingError(
        f"{struct_type.name} values are immutable: cannot set {attr!r} (make a new value: "
        f"{struct_type.name}({', '.join(name for name, _ in struct_type.fields)}))"
    )


def _build(context, builder, struct_type: StructType, values) -> object:
    proxy = cgutils.create_struct_proxy(struct_type)(context, builder)
    for (name, _), value in zip(struct_type.fields, values):
        setattr(proxy, name, value)
    return proxy._getvalue()


@lower_constant(StructType)
def _lower_struct_constant(context, builder, ty, pyval):
    return _build(
        context,
        builder,
        ty,
        [context.get_constant_generic(builder, ftype, getattr(pyval, name)) for name, ftype in ty.fields],
    )


@unbox(StructType)
def _unbox_struct(typ, obj, c):
    """A host value as a CPU kernel argument: each field read and unboxed (its type is the class's)."""
    values = []
    for name, ftype in typ.fields:
        field = c.pyapi.object_getattr_string(obj, name)
        values.append(c.unbox(ftype, field).value)
        c.pyapi.decref(field)
    return NativeValue(_build(c.context, c.builder, typ, values), is_error=c.pyapi.c_api_error())


# --- the constructor --------------------------------------------------------------------------------------


class StructClassType(types.Callable):
    """The numba type of a struct class used as a value in a kernel: calling it makes a value."""

    def __init__(self, cls: type):
        self.cls = cls
        super().__init__(name=f"class({cls.__qualname__})")

    @property
    def key(self):
        return self.cls

    def get_call_type(self, context, args, kws):
        argtypes = tuple(types.unliteral(a) for a in args)
        kwtypes = {k: types.unliteral(v) for k, v in kws.items()}
        if not hasattr(self.cls, "__overdub_bind__"):
            raise errors.TypingError(f"{self.cls.__qualname__} is an abstract type: it has no values")
        try:
            struct_type, fieldtypes = self.cls.__overdub_bind__(argtypes, kwtypes)
        except TypeError as exc:  # numba's error carries the kernel's source line
            raise errors.TypingError(str(exc)) from None
        return signature(struct_type, *fieldtypes).replace(pysig=self.cls.__overdub_spec__.signature)

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return StructClassType


def _typeof_struct_class(cls, c):
    """A struct class, or a user's abstract type (whose call says it has no values), read in a kernel."""
    return StructClassType(cls)


def _register_with_numba_cuda(numba_cuda) -> None:
    """numba internals: numba-cuda types values with its own typeof, whose registration for ``type`` answers
    for every class (so a class never reaches its fallback to numba's core typeof): struct classes register
    with it too, once numba-cuda is imported."""
    from numba.cuda.typing.typeof import typeof_impl as cuda_typeof_impl

    cuda_typeof_impl.register(LatticeMeta)(_typeof_struct_class)


typeof_impl.register(LatticeMeta)(_typeof_struct_class)
postimport.when_imported("numba.cuda", _register_with_numba_cuda)


register_model(StructClassType)(models.OpaqueModel)


@lower_constant(StructClassType)
def _lower_struct_class(context, builder, ty, pyval):
    return context.get_dummy_value()


@lower_builtin(StructClassType, types.VarArg(types.Any))
def _lower_construct(context, builder, sig, args):
    struct_type = sig.return_type
    values = [
        context.cast(builder, value, argtype, ftype)
        for value, argtype, (_, ftype) in zip(args, sig.args, struct_type.fields)
    ]
    return _build(context, builder, struct_type, values)
