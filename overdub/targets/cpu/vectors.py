"""numba-cuda's vector types (``cuda.float32x4(1.0, 2.0, v2)``, ``v.x``...) inside a CPU-target kernel: the same
numba types as numba-cuda's (its ``vector_types``), a struct of their components in the CPU's data model, their
constructors taking components and smaller vectors in any mix, each cast to the type's element type.

numba internals: numba's data model manager, attribute wrappers, typing templates and lowering registry, which
numba's CPU target reads (numba-cuda registers the same types in its own, for CUDA).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.extending import make_attribute_wrapper, register_model
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer_global, signature

from ...runtime import runtime

if TYPE_CHECKING:
    from llvmlite import ir
    from numba.core.base import BaseContext
    from numba.core.typing.templates import Signature

__all__ = ["CONSTRUCTORS", "register"]


def _numba_cuda_vector_types() -> dict[str, Any]:
    from numba.cuda.vector_types import vector_types  # numba-cuda's: the types its kernels' values have

    return dict(vector_types)


def _components(args: Sequence[types.Type], element: types.Type) -> int | None:
    """How many components ``args`` give a vector of ``element``s (a number each, a vector its own), or None
    where one is neither."""
    count = 0
    for arg in args:
        if isinstance(arg, types.Number | types.Boolean):
            count += 1
        elif getattr(arg, "attr_names", None) is not None and isinstance(getattr(arg, "base_type", None), types.Type):
            count += len(typing.cast("Any", arg).attr_names)  # numba-cuda's VectorType
        else:
            return None
    return count


def _constructor(vector: Any) -> Callable[..., Any]:
    """``cuda.<vector>(...)`` in a CPU-target kernel: typed, lowered, and found by name in another process."""

    def constructor(*args: object) -> object:
        raise TypeError(f"cuda.{vector.name} makes a vector inside a kernel, not on the host")

    constructor.__name__ = constructor.__qualname__ = vector.name
    constructor.__module__ = __name__
    globals()[vector.name] = constructor  # found by name (numba's registration checks, the disk cache)

    class Typing(AbstractTemplate):
        key = constructor

        def generic(self, args: tuple[types.Type, ...], kws: dict[str, types.Type]) -> Signature | None:
            if kws or _components(args, vector.base_type) != vector.num_elements:
                return None
            return signature(vector, *args)  # type: ignore[no-untyped-call, no-any-return]  # numba's is unannotated

    infer_global(constructor)(Typing)  # type: ignore[no-untyped-call]  # numba's is unannotated
    lower_builtin(constructor, types.VarArg(types.Any))(_lowering(vector))  # type: ignore[no-untyped-call]  # numba's is unannotated
    return constructor


def _lowering(vector: Any) -> Callable[..., ir.Value]:
    def lower(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        values = []
        for ty, value in zip(sig.args, args):
            if getattr(ty, "attr_names", None) is not None:
                parts = cgutils.create_struct_proxy(ty)(context, builder, value=value)  # type: ignore[no-untyped-call]  # numba's is unannotated
                for a in ty.attr_names:
                    values.append(context.cast(builder, getattr(parts, a), ty.base_type, vector.base_type))  # type: ignore[no-untyped-call]  # numba's is unannotated
            else:
                values.append(context.cast(builder, value, ty, vector.base_type))  # type: ignore[no-untyped-call]  # numba's is unannotated
        made = cgutils.create_struct_proxy(vector)(context, builder)  # type: ignore[no-untyped-call]  # numba's is unannotated
        for name, value in zip(vector.attr_names, values):
            setattr(made, name, value)
        return made._getvalue()

    return lower


def _model(vector: Any) -> type[models.StructModel]:
    class VectorModel(models.StructModel):
        def __init__(self, dmm: Any, fe_type: types.Type) -> None:
            super().__init__(dmm, fe_type, [(name, vector.base_type) for name in vector.attr_names])  # type: ignore[no-untyped-call]  # numba's is unannotated

    return VectorModel


def register() -> dict[str, Callable[..., Any]]:
    """Register numba-cuda's vector types with numba's CPU target, once numba-cuda is imported: their
    constructors, by name (:data:`CONSTRUCTORS`)."""
    for name, vector in _numba_cuda_vector_types().items():
        if name not in CONSTRUCTORS:
            register_model(type(vector))(_model(vector))
            for attribute in vector.attr_names:
                make_attribute_wrapper(type(vector), attribute, attribute)
            CONSTRUCTORS[name] = _constructor(vector)
    return CONSTRUCTORS  # numba's next compile refreshes its contexts: the templates and lowerings registered now


CONSTRUCTORS: dict[str, Callable[..., Any]] = {}
"""``cuda.float32x4`` and numba-cuda's other vector types' constructors, by name, for the CPU target's kernels
(:func:`register` fills it)."""
runtime.register_cache(f"{__name__}.CONSTRUCTORS", CONSTRUCTORS, kept="registered with numba once: for good")
