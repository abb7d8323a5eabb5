"""numba's types and numba-cuda-mlir's, one to one: the typing bridge of this target.

numba-cuda-mlir carries its own copy of numba's type classes (``numba_cuda_mlir.numba_cuda.types``): its
``float64`` is not numba's. overdub decides every call -- dispatch, the chain's overdubs, edges -- on numba's
types, as on the other targets; this module translates what crosses between the two: the argument types of a
call numba-cuda-mlir is typing (to numba's, for dispatch), and the signatures overdub answers (to its own).

A type is translated by its structure: numbers, booleans and ``none`` by name; arrays, tuples, named tuples,
literals, ``Omitted`` and pointers by their parts; a struct as a named tuple of its *shadow*, a named-tuple class
standing for the struct class (:func:`shadow`). A type with no counterpart raises :class:`Untranslatable`,
which the target turns into a message naming the type: never a type of another meaning.
"""

from __future__ import annotations

import collections
import importlib
import re
import sys
from typing import Any

from numba.core import types as nt

from ...types import PtrType, StructType

# numba-cuda-mlir's types module and kernel language, as Any: its partial annotations (its .pyi stubs) are not
# what overdub checks against
mt: Any = importlib.import_module("numba_cuda_mlir.numba_cuda.types")
mlir_cuda: Any = importlib.import_module("numba_cuda_mlir.cuda")

__all__ = ["Untranslatable", "to_mlir", "to_numba", "signature_to_mlir", "signature_to_numba"]


class Untranslatable(TypeError):
    """A type one side has and the other has not (yet): what the target cannot compile, said plainly."""


# the scalar types both sides name alike
_SCALARS = [
    "boolean",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "none",
    "void",
    "intp",
    "uintp",
]
_TO_MLIR: dict[object, object] = {getattr(nt, name): getattr(mt, name) for name in _SCALARS}
_TO_NUMBA: dict[object, object] = {value: key for key, value in _TO_MLIR.items()}


def _convert(t: Any, side: Any, scalars: dict[object, object], back: Any) -> Any:
    """``t`` (a type of the other side) as a type of ``side`` (numba's or numba-cuda-mlir's types module)."""
    found = scalars.get(t)
    if found is not None:
        return found
    convert = back  # the same translation, recursively
    name = type(t).__name__
    if name == "Array":
        if side is mt and isinstance(t.dtype, StructType):
            raise Untranslatable(
                f"{t} is an array of a struct, and numba-cuda-mlir 0.6.0's arrays are memrefs of numbers "
                f"(docs/cuda-mlir.md): launch on target='cuda'"
            )
        return side.Array(convert(t.dtype), t.ndim, t.layout, readonly=not t.mutable, aligned=t.aligned)
    if name == "UniTuple":
        return side.UniTuple(convert(t.dtype), t.count)
    if name == "Tuple":
        return side.Tuple(tuple(convert(item) for item in t.types))
    if name in ("NamedUniTuple", "NamedTuple"):
        struct_type = getattr(t.instance_class, "__overdub_struct_type__", None)
        if struct_type is not None and side is nt:  # a struct's value, as numba-cuda-mlir holds it
            return struct_type
        return side.NamedTuple(tuple(convert(item) for item in t.types), t.instance_class)
    if name == "StructType" and side is mt:
        return side.NamedTuple(tuple(convert(ftype) for _, ftype in t.fields), shadow(t))
    if name in ("IntegerLiteral", "BooleanLiteral", "StringLiteral"):
        return getattr(side, name)(t.literal_value)
    if name == "Omitted":
        return side.Omitted(t.value)
    if name == "StarArgTuple":
        return side.StarArgTuple(tuple(convert(item) for item in t.types))
    if name in ("CPointer", "PtrType"):  # numba-cuda-mlir's pointers are overdub's typed pointers
        return side.CPointer(convert(t.dtype)) if side is mt else PtrType(convert(t.dtype))
    if name == "UnicodeType":
        return side.unicode_type
    if name == "NumberClass":
        return side.NumberClass(convert(t.instance_type))
    same = _same_class(t, side)
    if same is not None:
        return same
    raise Untranslatable(f"the type {t} has no counterpart in {'numba-cuda-mlir' if side is mt else 'numba'}")


# where the two keep the kernel language's own types (Dim3, GridGroup): numba-cuda's, numba-cuda-mlir's
_HOMES = {
    "numba_cuda_mlir.numba_cuda.types": ("numba.cuda.types", "numba.core.types"),
    "numba": ("numba_cuda_mlir.numba_cuda.types",),
}


def _same_class(t: Any, side: Any) -> Any:
    """A type of no parameters (numba-cuda's ``Dim3``) as the class of the same name and module on the other
    side makes it, or None."""
    module = type(t).__module__
    home = "numba_cuda_mlir.numba_cuda.types" if module.startswith("numba_cuda_mlir.") else "numba"
    tail = module.split(".types", 1)[1] if ".types" in module else ""
    for prefix in _HOMES[home]:
        cls = getattr(sys.modules.get(prefix + tail), type(t).__name__, None)
        if isinstance(cls, type):
            try:
                made = cls()
            except TypeError:  # it takes parameters: not translated by its name alone
                return None
            return made if str(made) == str(t) else None
    return None


def shadow(struct_type: StructType) -> type:
    """The named-tuple class standing for a struct class on this target (its name, its fields): numba-cuda-mlir
    holds a struct's value as a named tuple of it, reads its fields by name, passes it to kernels field by
    field."""
    cls = struct_type.cls
    found: type | None = cls.__dict__.get("__overdub_mlir_shadow__")  # kept on the class: it dies with it
    if found is None:
        name = re.sub(r"\W", "_", cls.__name__)  # Dual[float32] -> Dual_float32_: an identifier
        named_tuple: Any = collections.namedtuple  # a class made at run time, which mypy does not follow
        made = named_tuple(name, [field for field, _ in struct_type.fields])
        made.__qualname__ = cls.__qualname__
        made.__overdub_struct_type__ = struct_type
        type.__setattr__(cls, "__overdub_mlir_shadow__", made)
        found = made
    return found


def to_mlir(t: Any) -> Any:
    """numba's type ``t`` as numba-cuda-mlir's."""
    return _convert(t, mt, _TO_MLIR, to_mlir)


def to_numba(t: Any) -> Any:
    """numba-cuda-mlir's type ``t`` as numba's."""
    return _convert(t, nt, _TO_NUMBA, to_numba)


def signature_to_mlir(sig: Any) -> Any:
    """A numba signature as numba-cuda-mlir's (its Python signature kept: lowering folds keywords by it)."""
    from numba_cuda_mlir.numba_cuda.typing.templates import signature

    translated = signature(to_mlir(sig.return_type), *(to_mlir(a) for a in sig.args))
    return translated.replace(pysig=sig.pysig) if sig.pysig is not None else translated


def signature_to_numba(sig: Any) -> Any:
    from numba.core.typing.templates import signature

    translated = signature(to_numba(sig.return_type), *(to_numba(a) for a in sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
    return translated.replace(pysig=sig.pysig) if sig.pysig is not None else translated
