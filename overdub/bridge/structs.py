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

import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from numba.core import cgutils, errors, types
from numba.core.extending import NativeValue, models, register_model, typeof_impl, unbox
from numba.core.imputils import lower_builtin, lower_constant, lower_getattr_generic, lower_setattr_generic
from numba.core.typing.templates import AttributeTemplate, infer_getattr, signature

from .. import world
from ..types import LatticeMeta, StructType

if TYPE_CHECKING:
    from llvmlite import ir
    from numba.core.base import BaseContext
    from numba.core.datamodel.manager import DataModelManager
    from numba.core.pythonapi import _UnboxContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from ..structs import StructDefinition, StructMeta

__all__ = ["StructClassType", "typeof_struct_class"]


@register_model(StructType)
class _StructModel(models.StructModel):
    def __init__(self, dmm: DataModelManager, fe_type: StructType) -> None:
        super().__init__(dmm, fe_type, list(fe_type.fields))  # type: ignore[no-untyped-call]  # numba's is unannotated


@infer_getattr
class _StructFields(AttributeTemplate):
    key = StructType

    def generic_resolve(self, typ: StructType, attr: str) -> types.Type | None:  # type: ignore[override]  # numba declares it NotImplemented
        if typ.definition is not None:
            world.consult(
                typing.cast("StructDefinition", typ.definition)
            )  # code reading fields depends on the class statement
        return typ.field_type(attr)


@lower_getattr_generic(StructType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _lower_field(context: BaseContext, builder: ir.IRBuilder, typ: StructType, value: ir.Value, attr: str) -> ir.Value:
    proxy = cgutils.create_struct_proxy(typ)(context, builder, value=value)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return getattr(proxy, attr)


@lower_setattr_generic(StructType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _refuse_field_assignment(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value], attr: str
) -> None:
    """numba types ``c.r = x`` through the field reads' template, so the refusal comes at lowering (numba wraps
    it with the kernel's source line)."""
    struct_type = sig.args[0]
    raise errors.TypingError(
        f"{struct_type.name} values are immutable: cannot set {attr!r} (make a new value: "
        f"{struct_type.name}({', '.join(name for name, _ in struct_type.fields)}))"
    )


def _build(
    context: BaseContext, builder: ir.IRBuilder, struct_type: StructType, values: Sequence[ir.Value]
) -> ir.Value:
    proxy = cgutils.create_struct_proxy(struct_type)(context, builder)  # type: ignore[no-untyped-call]  # numba's is unannotated
    for (name, _), value in zip(struct_type.fields, values):
        setattr(proxy, name, value)
    return proxy._getvalue()


@lower_constant(StructType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _lower_struct_constant(context: BaseContext, builder: ir.IRBuilder, ty: StructType, pyval: object) -> ir.Value:
    return _build(
        context,
        builder,
        ty,
        [context.get_constant_generic(builder, ftype, getattr(pyval, name)) for name, ftype in ty.fields],  # type: ignore[no-untyped-call]  # numba's is unannotated
    )


@unbox(StructType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's unboxing registry is unannotated
def _unbox_struct(typ: StructType, obj: ir.Value, c: _UnboxContext) -> NativeValue:
    """A host value as a CPU kernel argument: each field read and unboxed (its type is the class's)."""
    values: list[ir.Value] = []
    for name, ftype in typ.fields:
        field = c.pyapi.object_getattr_string(obj, name)
        values.append(c.unbox(ftype, field).value)  # type: ignore[no-untyped-call]  # numba's is unannotated
        c.pyapi.decref(field)
    return NativeValue(_build(c.context, c.builder, typ, values), is_error=c.pyapi.c_api_error())  # type: ignore[no-untyped-call]  # numba's is unannotated


# --- the constructor --------------------------------------------------------------------------------------


class StructClassType(types.Callable):
    """The numba type of a struct class used as a value in a kernel: calling it makes a value."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        super().__init__(name=f"class({cls.__qualname__})")

    @property
    def key(self) -> type:
        return self.cls

    def get_call_type(
        self, context: TypingContext, args: Sequence[types.Type], kws: Mapping[str, types.Type]
    ) -> Signature:
        argtypes = tuple(types.unliteral(a) for a in args)  # type: ignore[no-untyped-call]  # numba's is unannotated
        kwtypes = {k: types.unliteral(v) for k, v in kws.items()}  # type: ignore[no-untyped-call]  # numba's is unannotated
        if not hasattr(self.cls, "__overdub_bind__"):
            raise errors.TypingError(f"{self.cls.__qualname__} is an abstract type: it has no values")
        try:
            struct_type, fieldtypes = self.cls.__overdub_bind__(argtypes, kwtypes)
        except TypeError as exc:  # numba's error carries the kernel's source line
            raise errors.TypingError(str(exc)) from None
        cls = typing.cast("StructMeta", self.cls)  # binds: a struct class
        sig: Signature = signature(struct_type, *fieldtypes)  # type: ignore[no-untyped-call]  # numba's is unannotated
        replaced: Signature = sig.replace(pysig=cls.__overdub_spec__.signature)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return replaced

    def get_call_signatures(self) -> tuple[list[Signature], bool]:
        return [], True

    def get_impl_key(self, sig: Signature) -> type[StructClassType]:
        return StructClassType


def typeof_struct_class(cls: type, c: object) -> StructClassType:
    """A struct class, or a user's abstract type (whose call says it has no values), read in a kernel."""
    return StructClassType(cls)


typeof_impl.register(LatticeMeta)(typeof_struct_class)


register_model(StructClassType)(models.OpaqueModel)


@lower_constant(StructClassType)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _lower_struct_class(context: BaseContext, builder: ir.IRBuilder, ty: StructClassType, pyval: type) -> ir.Value:
    return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated


@lower_builtin(StructClassType, types.VarArg(types.Any))  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _lower_construct(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    struct_type = sig.return_type
    values = [
        context.cast(builder, value, argtype, ftype)  # type: ignore[no-untyped-call]  # numba's is unannotated
        for value, argtype, (_, ftype) in zip(args, sig.args, struct_type.fields)
    ]
    return _build(context, builder, struct_type, values)
