"""The dispatch type lattice.

Concrete types are numba's own types (``int64``, ``float32``, ``array(float32, 1d, C)``, ...): they are what
type inference sees at a call site, so dispatch can run during numba's typing with no translation. Above
them sit overdub's abstract types, which exist only to annotate methods:

    Any
    ├── Number
    │   ├── Integer   (signed and unsigned machine integers)
    │   ├── Float     (float16, float32, float64)
    │   └── Complex   (complex64, complex128)
    ├── Boolean       (bool_)
    ├── Ptr[T]        (typed device pointer; covariant in T)
    ├── Array[T, N]   (numba arrays of any layout; covariant in T, N optional)
    └── user abstract types (``class Shape(od.AbstractType)``), over user structs (``@od.struct``)

A user's abstract type is a *class* deriving from :class:`AbstractType`; its supertypes are the abstract
classes it derives from (Any when none). A struct's concrete type is a :class:`StructType`, a numba type whose
``cls`` is the Python class of its values; it is below every abstract class that class derives from. A
parametric struct ``Dual`` (``typing.Generic[T]``) has one StructType per instantiation (``Dual[float64]``);
``Dual`` itself and ``Dual[Float]`` are :class:`StructPattern` s matching the instantiations whose parameters
are subtypes of the pattern's. A ``typing.NamedTuple`` class annotates as a :class:`NamedTuplePattern`,
matching numba's named tuple types of that class whatever their field types.

``Ptr[T]`` with a concrete ``T`` is the concrete numba type :class:`PtrType` of pointer values; with an
abstract ``T`` it is a pattern matching every concrete pointer whose element type is a subtype of ``T``.
``Array[T, N]`` is always a pattern, since a concrete array type also fixes the layout.

:func:`issubtype` is the subtype relation over all of it; :func:`as_type` turns an annotation (including
Python's ``int``, ``float``, ``bool`` and ``complex``) into a lattice type.
"""

from __future__ import annotations

import inspect
import types as pytypes
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal, Protocol, Self, TypeAlias, TypeGuard, cast

import numba
import numba.np.numpy_support
import numpy as np
from numba import _dispatcher
from numba.core import types as nt
from numba.core.typing.typeof import Purpose

from .runtime import runtime

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "AbstractType",
    "LatticeMeta",
    "StructType",
    "StructPattern",
    "NamedTuplePattern",
    "Any",
    "Number",
    "Integer",
    "Float",
    "Complex",
    "Boolean",
    "Ptr",
    "PtrType",
    "Array",
    "Callee",
    "CalleeType",
    "issubtype",
    "as_type",
    "is_concrete",
    "type_name",
    "typeof",
    "element_type",
    "STRUCT_METADATA",
    "same_type_check",
    "fits_int64",
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
    "bool_",
]

int8, int16, int32, int64 = nt.int8, nt.int16, nt.int32, nt.int64
uint8, uint16, uint32, uint64 = nt.uint8, nt.uint16, nt.uint32, nt.uint64
float16, float32, float64 = nt.float16, nt.float32, nt.float64
complex64, complex128 = nt.complex64, nt.complex128
bool_ = nt.boolean

# What as_type makes of an annotation: a concrete numba type, a built-in abstract node (Any, Number, ...), a
# user's abstract class, or a pattern (Ptr[T] of an abstract T, Array[T, N], a parametric struct, a NamedTuple).
LatticeType: TypeAlias = (
    "nt.Type | AbstractType | type | PtrPattern | ArrayPattern | StructPattern | NamedTuplePattern | CalleePattern"
)
ConcreteType: TypeAlias = nt.Type  # a type some value has exactly: a numba type (see is_concrete)

# A check that another value of the class it was made for has the type it was made for (see same_type_check);
# its argument is whatever value the caller holds, of that class.
ValueCheck: TypeAlias = Callable[[typing.Any], bool]


class LatticeMeta(type):
    """The metaclass of user abstract types and structs: they print as their names, as types do in Julia."""

    def __repr__(cls) -> str:
        return cls.__qualname__


class AbstractType(metaclass=LatticeMeta):
    """A node of the lattice that no value has as its exact type; it only annotates methods.

    The built-in nodes (Any, Number, ...) are its instances. A user's abstract type is a class deriving from it
    (``class Shape(od.AbstractType): pass``), with no instances either; ``@od.struct`` classes deriving from
    it are its concrete subtypes."""

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        if cls is not AbstractType:
            raise TypeError(
                f"{cls.__qualname__} is an abstract type: it has no values (define an @od.struct "
                f"class deriving from it, and make values of that)"
            )
        return super().__new__(cls)

    def __init__(
        self,
        name: str,
        parent: AbstractType | None,
        numba_class: type[nt.Type] | tuple[type[nt.Type], ...] | None = None,
    ) -> None:
        self.name = name
        self.parent = parent
        self._numba_class = numba_class  # concrete numba types of this class are its leaves

    def __reduce__(self) -> tuple[Callable[[str], AbstractType], tuple[str]]:
        return _abstract_type, (self.name,)

    def contains(self, t: nt.Type) -> bool:
        """Is the concrete numba type ``t`` below this node?"""
        if self is Any:
            return True
        return self._numba_class is not None and isinstance(t, self._numba_class)

    def ancestors(self) -> Iterator[AbstractType]:
        node: AbstractType | None = self
        while node is not None:
            yield node
            node = node.parent

    def __repr__(self) -> str:
        return self.name


def is_abstract_class(t: object) -> bool:
    """Is ``t`` a user's abstract type (a class deriving from AbstractType that is no struct)?"""
    return isinstance(t, LatticeMeta) and issubclass(t, AbstractType) and "__overdub_type__" not in vars(t)


def _is_node(t: object) -> TypeIs[AbstractType]:
    """A built-in abstract node (Any, Number, ...); struct values deriving from a user's abstract type are not."""
    return type(t) is AbstractType


def _abstract_type(name: str) -> AbstractType:
    """The lattice's abstract type called ``name`` (abstract types pickle by name)."""
    node: AbstractType = globals()[name]
    return node


Any = AbstractType("Any", None)
Number = AbstractType("Number", Any, (nt.Integer, nt.Float, nt.Complex))
Integer = AbstractType("Integer", Number, nt.Integer)
Float = AbstractType("Float", Number, nt.Float)
Complex = AbstractType("Complex", Number, nt.Complex)
Boolean = AbstractType("Boolean", Any, nt.Boolean)


class PtrType(nt.CPointer):
    """The concrete numba type of a typed pointer to ``dtype`` elements (what ``od.pointer`` returns). A kind
    of numba's ``CPointer(dtype)`` (the same LLVM pointer), so what numba-cuda does with one -- ``carray``,
    ``farray`` -- it does with this."""

    def __init__(self, dtype: nt.Type):
        if not is_concrete(dtype):
            raise TypeError(f"PtrType needs a concrete element type, not {dtype!r}")
        self.dtype, self.addrspace = dtype, None
        nt.Type.__init__(self, name=f"Ptr[{dtype}]")

    @property
    def key(self) -> nt.Type:
        return cast(nt.Type, self.dtype)


class PtrPattern:
    """``Ptr[T]`` for an abstract ``T``: every pointer whose element type is a subtype of ``T``."""

    __slots__ = ("eltype",)

    def __init__(self, eltype: LatticeType) -> None:
        self.eltype = eltype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PtrPattern) and other.eltype == self.eltype

    def __hash__(self) -> int:
        return hash((PtrPattern, self.eltype))

    def __repr__(self) -> str:
        return f"Ptr[{type_name(self.eltype)}]"


class ArrayPattern:
    """``Array[T, N]``: numba arrays of any layout with element type below ``T`` and, if given, ``N`` dims."""

    __slots__ = ("eltype", "ndim")

    def __init__(self, eltype: LatticeType, ndim: int | None) -> None:
        self.eltype = eltype
        self.ndim = ndim

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayPattern) and (other.eltype, other.ndim) == (self.eltype, self.ndim)

    def __hash__(self) -> int:
        return hash((ArrayPattern, self.eltype, self.ndim))

    def __repr__(self) -> str:
        dims = "" if self.ndim is None else f", {self.ndim}"
        return f"Array[{type_name(self.eltype)}{dims}]"


STRUCT_METADATA = "overdub.struct"  # the key of a struct array's dtype metadata naming its StructType


def _struct_type_of(cls: type) -> StructType:
    struct_type: StructType = cls.__overdub_type__  # type: ignore[attr-defined]  # overdub.structs sets it on the class
    return struct_type


class Definition(Protocol):
    """The world node of a struct's class statement, as this module reads it (``overdub.structs``'s
    ``StructDefinition``, which sits above this module)."""

    @property
    def valid(self) -> bool: ...

    def superseded(self, struct_type: StructType) -> str: ...


class StructType(nt.Type):
    """The concrete numba type of the values of one struct class ``cls`` (one instantiation of a parametric
    struct): its ``fields``, (name, numba type) pairs in order, and the numpy ``numpy_dtype`` its arrays have.
    The class is the type's identity, so a redefined class is a new type."""

    def __init__(
        self,
        cls: type,
        fields: tuple[tuple[str, nt.Type], ...],
        numpy_dtype: np.dtype[typing.Any] | None,  # None until overdub.structs makes it (its metadata names this type)
        base: type | None = None,
        params: tuple[LatticeType, ...] = (),
    ) -> None:
        self.cls, self.fields, self.numpy_dtype = cls, tuple(fields), numpy_dtype
        self.base, self.params = base, tuple(params)  # the parametric class and its parameters, if any
        self.definition: Definition | None = None  # the world node of the class statement (overdub.structs sets it)
        super().__init__(name=cls.__qualname__)

    @property
    def key(self) -> type:
        return self.cls

    def __reduce__(self) -> tuple[Callable[[type], StructType], tuple[type]]:
        """By its class, which pickles by reference: where it is unpickled, the type of the class found there
        (what the disk cache's entries hold; the cache checks the class's layout before using one)."""
        return _struct_type_of, (self.cls,)

    def field_type(self, name: str) -> nt.Type | None:
        return dict(self.fields).get(name)

    def check_current(self, doing: str) -> None:
        """Raise when the class statement of this type was run again (its definition node is invalid): no
        current code names this type, so its values are refused rather than dispatched to stale methods."""
        if self.definition is not None and not self.definition.valid:
            raise TypeError(f"cannot {doing} {self.name}: {self.definition.superseded(self)}")


class StructPattern:
    """A parametric struct as an annotation: ``Dual`` (``params`` None: every instantiation) or ``Dual[Float]``
    (instantiations whose parameters are subtypes of ``params``)."""

    __slots__ = ("base", "params")

    def __init__(self, base: type, params: tuple[LatticeType, ...] | None) -> None:
        self.base, self.params = base, params

    def matches(self, t: StructType) -> bool:
        return t.base is self.base and (self.params is None or all(map(subtype, t.params, self.params)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StructPattern) and (other.base, other.params) == (self.base, self.params)

    def __hash__(self) -> int:
        return hash((StructPattern, self.base, self.params))

    def __repr__(self) -> str:
        if self.params is None:
            return self.base.__qualname__
        return f"{self.base.__qualname__}[{', '.join(type_name(p) for p in self.params)}]"


class NamedTuplePattern:
    """A ``typing.NamedTuple`` (or ``collections.namedtuple``) class as an annotation: numba's named tuple types
    of that class, whatever the types of their fields."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedTuplePattern) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash((NamedTuplePattern, self.cls))

    def __repr__(self) -> str:
        return self.cls.__qualname__


def is_namedtuple_class(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")


def _struct_class(t: object) -> type | None:
    """The class a struct type or pattern is about (for its abstract supertypes), else None."""
    if isinstance(t, StructType):
        return t.cls
    if isinstance(t, StructPattern):
        return t.base
    return None


def callee_key(callee: object) -> object:
    """How overdub tables name a callee: a function defined at a module's top level by its module namespace
    and qualified name (so an overdub survives the function's redefinition, as a Julia overdub survives a
    method's); a lambda, a closure or anything else by identity (two lambdas of a module are two callees)."""
    if isinstance(callee, pytypes.FunctionType) and "<" not in callee.__qualname__:
        return (id(callee.__globals__), callee.__qualname__)
    return callee


def callee_name(callee: object) -> str:
    return getattr(callee, "__qualname__", None) or getattr(callee, "__name__", None) or repr(callee)


class CalleeType(nt.Type):
    """The type of one callee as a hook of every call (``prehook(od.Any)``) receives it first: ``Callee[f]``.
    A function of a module's top level is known by its module and qualified name, so the type outlives the
    function's redefinition (as a context's overdubs of it do)."""

    def __init__(self, callee: object) -> None:
        self._key = callee_key(callee)
        # a key naming a module's namespace by its id: the namespace kept alive with it
        self.namespace = getattr(callee, "__globals__", None)
        super().__init__(name=f"Callee[{callee_name(callee)}]")

    @property
    def key(self) -> object:
        return self._key


class CalleePattern:
    """``Callee``: the pattern of every :class:`CalleeType`."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CalleePattern)

    def __hash__(self) -> int:
        return hash(CalleePattern)

    def __repr__(self) -> str:
        return "Callee"


class _CalleeConstructor:
    """``Callee[f]``: the type of the callee ``f`` where a hook of every call receives it; bare ``Callee``,
    every callee."""

    def __getitem__(self, callee: object) -> CalleeType:
        return CalleeType(callee)

    def __repr__(self) -> str:
        return "Callee"

    def __reduce__(self) -> str:
        return "Callee"  # the one od.Callee, by name


class _PtrConstructor:
    """``Ptr[T]``: the concrete :class:`PtrType` for a concrete ``T``, a pattern otherwise."""

    def __getitem__(self, eltype: object) -> PtrType | PtrPattern:
        eltype = as_type(eltype)
        return PtrType(eltype) if is_concrete(eltype) else PtrPattern(eltype)

    def __repr__(self) -> str:
        return "Ptr"

    def __reduce__(self) -> str:
        return "Ptr"  # the one od.Ptr, by name: annotations shipped to another process (overdub.travel) mean it


class _ArrayConstructor:
    """``Array[T]`` or ``Array[T, N]``: a pattern over numba array types."""

    def __getitem__(self, params: object) -> ArrayPattern:
        eltype, ndim = params if isinstance(params, tuple) else (params, None)
        if ndim is not None and (not isinstance(ndim, int) or ndim < 0):
            raise TypeError(f"Array[T, N] needs a non-negative integer N, not {ndim!r}")
        return ArrayPattern(as_type(eltype), ndim)

    def __repr__(self) -> str:
        return "Array"

    def __reduce__(self) -> str:
        return "Array"  # the one od.Array, by name


Ptr = _PtrConstructor()
Array = _ArrayConstructor()
Callee = _CalleeConstructor()

_PYTHON_ANNOTATIONS = {int: Integer, float: Float, bool: Boolean, complex: Complex}


def as_type(annotation: object) -> LatticeType:
    """The lattice type an annotation means; unannotated parameters (``inspect.Parameter.empty``) are Any.

    A struct class means its StructType (a parametric one, the pattern of all its instantiations), a user's
    abstract type class itself, a NamedTuple class the pattern of its named tuple types."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return Any
    if isinstance(annotation, type):
        if annotation in _PYTHON_ANNOTATIONS:
            return _PYTHON_ANNOTATIONS[annotation]
        if isinstance(annotation, LatticeMeta):
            struct_or_abstract: LatticeType = annotation.__dict__.get("__overdub_type__", annotation)
            return struct_or_abstract
        if is_namedtuple_class(annotation):
            return NamedTuplePattern(annotation)
    if annotation is Ptr:
        return PtrPattern(Any)
    if annotation is Array:
        return ArrayPattern(Any, None)
    if annotation is Callee:
        return CalleePattern()
    if _is_node(annotation) or isinstance(
        annotation, (PtrPattern, ArrayPattern, StructPattern, NamedTuplePattern, CalleePattern, nt.Type)
    ):
        return annotation
    raise TypeError(
        f"{annotation!r} is not an overdub type: use od.Any, od.Integer, od.Ptr[T], a numba type, "
        f"int/float/bool/complex, an @od.struct or od.AbstractType class, or a typing.NamedTuple"
    )


def is_concrete(t: object) -> TypeGuard[nt.Type]:
    """Is ``t`` a type some value can have exactly (a numba type), rather than an abstract pattern?"""
    return isinstance(t, nt.Type)


def issubtype(a: object, b: object) -> bool:
    """The subtype relation of the lattice: is every value of type ``a`` also of type ``b``?

    Both sides may be annotations (``int``, bare ``Ptr`` or ``Array``) as well as lattice types.
    """
    return subtype(as_type(a), as_type(b))


def _array_below(a: nt.Array, b: nt.Array) -> bool:
    """Is every array of type ``a`` one of type ``b``? Where ``b``'s layout is ``A`` (any: numba's
    ``float64[:]``) or the same, and its dtype, rank, writability and alignment are ``a``'s. (A writable array
    is not below a read-only type: a method for read-only arrays would take every array of its dtype.)"""
    return (
        a.dtype == b.dtype
        and a.ndim == b.ndim
        and b.layout in ("A", a.layout)
        and a.mutable == b.mutable
        and a.aligned == b.aligned
    )


def subtype(a: LatticeType, b: LatticeType) -> bool:
    """:func:`issubtype` for lattice types already normalised by :func:`as_type` (the dispatch hot path)."""
    if a == b or b is Any:
        return True
    if _is_node(b):
        if _is_node(a):
            return any(node is b for node in a.ancestors())
        if isinstance(a, (PtrPattern, ArrayPattern, StructPattern, NamedTuplePattern, CalleePattern, CalleeType, type)):
            return False
        return b.contains(a)
    if isinstance(b, CalleePattern):
        return isinstance(a, (CalleeType, CalleePattern))
    if isinstance(b, type):  # a user's abstract type: its subclasses are below it
        a_class = a if isinstance(a, type) else _struct_class(a)
        return a_class is not None and issubclass(a_class, b)
    if isinstance(b, StructPattern):
        if isinstance(a, StructPattern):
            return a.base is b.base and (
                b.params is None or (a.params is not None and all(map(subtype, a.params, b.params)))
            )
        return isinstance(a, StructType) and b.matches(a)
    if isinstance(b, NamedTuplePattern):
        # numba's BaseNamedTuple leaves instance_class to its two subclasses (NamedTuple, NamedUniTuple), both set it
        return isinstance(a, nt.BaseNamedTuple) and a.instance_class is b.cls  # type: ignore[attr-defined]
    if isinstance(b, PtrPattern):
        if isinstance(a, PtrType):
            return subtype(a.dtype, b.eltype)
        return isinstance(a, PtrPattern) and subtype(a.eltype, b.eltype)
    if isinstance(b, ArrayPattern):
        a_eltype: LatticeType
        a_ndim: int | None
        if isinstance(a, nt.Array):
            a_eltype, a_ndim = a.dtype, a.ndim
        elif isinstance(a, ArrayPattern):
            a_eltype, a_ndim = a.eltype, a.ndim
        else:
            return False
        return subtype(a_eltype, b.eltype) and (b.ndim is None or a_ndim == b.ndim)
    if isinstance(b, PtrType) and isinstance(a, PtrType):
        return bool(a.dtype == b.dtype)
    if isinstance(b, nt.Array) and isinstance(a, nt.Array):
        return _array_below(a, b)
    return False  # distinct concrete types, or an abstract type below a concrete one


def typeof(value: object) -> nt.Type:
    """The concrete type of a host value: the numba type a kernel argument of that value gets on the CPU (an
    array of structs has its StructType as element type)."""
    if isinstance(value, np.ndarray) and value.dtype.metadata and STRUCT_METADATA in value.dtype.metadata:
        layout: Literal["C", "F", "A"] = "C" if value.flags.c_contiguous else ("F" if value.flags.f_contiguous else "A")
        return nt.Array(element_type(value.dtype), value.ndim, layout, readonly=not value.flags.writeable)
    # numba's typeof is unannotated
    found: nt.Type = numba.typeof(value, Purpose.argument)  # type: ignore[no-untyped-call]
    return found


# numpy dtypes numba's core does not know, as the numba type a target gives their elements (the CUDA target:
# ml_dtypes' bfloat16 as numba-cuda's, once ml_dtypes is imported)
target_element_types: dict[np.dtype[typing.Any], nt.Type] = {}
runtime.register_cache(
    f"{__name__}.target_element_types", target_element_types, kept="what each target registered when imported"
)


def element_type(dtype: np.dtype[typing.Any]) -> nt.Type:
    """The numba type of one element of an array of ``dtype``: the StructType its metadata names (an array of
    an ``@od.struct``), else numba's own (a numba Record for any other structured dtype), else a target's
    (:data:`target_element_types`)."""
    metadata = dtype.metadata
    if metadata and STRUCT_METADATA in metadata:
        struct_type: StructType = metadata[STRUCT_METADATA]
        return struct_type
    if target_element_types and dtype in target_element_types:
        return target_element_types[dtype]
    if not dtype.isnative:  # numba refuses it with a bare "NumbaNotImplementedError: >f8"
        raise TypeError(
            f"an array of {dtype.str} is not in this machine's byte order, the only one kernels read: convert it "
            f"first, a.astype(a.dtype.newbyteorder('='))"
        )
    numba_type: nt.Type = numba.from_dtype(dtype)  # its overloads answer Any for a dtype of unknown scalar type
    return numba_type


# what numba's passes recognise by identity, kept itself in compiled code: ``len``; the bridge and the targets add
# theirs (``literal_unroll``, numba's and numba-cuda's), by id
_kept_as_is: dict[int, object] = {id(len): len}
runtime.register_cache(f"{__name__}._kept_as_is", _kept_as_is, kept="what numba recognises by identity")


def keep_as_is(value: object) -> None:
    """Have ``value`` stay itself in compiled code, never a context's to substitute: numba's passes recognise
    it by identity (``literal_unroll``: a proxy in its place left the loop over a tuple unrolled by nothing)."""
    _kept_as_is[id(value)] = value


def is_overdubbable(value: object) -> bool:
    """Callables a context may substitute (:mod:`overdub.rewrite`): generic, plain Python, builtin and module
    functions, intrinsics, ufuncs. Classes and numba types (``range``, ``np.float32``, ``numba.int32``) stay what
    they are, and so does what numba recognises by identity (``len``, ``literal_unroll``: :func:`keep_as_is`)."""
    return callable(value) and not isinstance(value, type) and not is_concrete(value) and id(value) not in _kept_as_is


_NUMERIC_KINDS = ((nt.Boolean, 0), (nt.Integer, 1), (nt.Float, 2), (nt.Complex, 3))


def numeric_kind(t: object) -> int | None:
    """The rank of a numeric type's kind -- bool 0 < integer 1 < float 2 < complex 3 -- or None for others."""
    try:
        return _kinds[t]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        rank = next((rank for kind, rank in _NUMERIC_KINDS if isinstance(t, kind)), None)
    if isinstance(t, nt.Type):
        _kinds[t] = rank
    return rank


_kinds: dict[object, int | None] = {}  # numba types (any object is looked up: the callers' field annotations)
runtime.register_cache(f"{__name__}._kinds", _kinds)


def dtype_of(t: nt.Type) -> np.dtype[typing.Any]:
    """The numpy dtype of values of the concrete type ``t`` (a struct's is aligned as the device lays it out)."""
    # a StructType's numpy_dtype is None only while overdub.structs makes it, before any caller sees the type
    if isinstance(t, StructType):
        return t.numpy_dtype  # type: ignore[return-value]
    for dtype, element in target_element_types.items():  # a target's own element type (ml_dtypes' bfloat16)
        if element == t:
            return dtype
    return numba.np.numpy_support.as_dtype(t)


def from_dtype(dtype: np.dtype[typing.Any]) -> nt.Type:
    numba_type: nt.Type = numba.from_dtype(dtype)
    return numba_type


_CLASS_DECIDES = (float, bool, complex, str)


def fits_int64(v: int) -> bool:
    """Whether the int ``v`` is typed int64 (beyond its range: uint64, or no type)."""
    return -9223372036854775808 <= v <= 9223372036854775807


def _plain_dtype(dtype: np.dtype[typing.Any]) -> bool:
    """A numeric dtype without fields or metadata (a struct's, a record's), whose class or fingerprint decides
    the numba type (a datetime's unit, a string's length would not be)."""
    return dtype.kind in "biufc" and dtype.fields is None and not dtype.metadata


def same_type_check(value: object, numba_type: nt.Type) -> ValueCheck | Literal[False] | None:
    """How to know, cheaply, that another value of ``value``'s class has the type ``numba_type`` (``value``'s
    own): None where the class alone decides it (float, bool, complex, str, numpy scalars); a check of the
    value where the class does not (an int's range decides int64 or uint64; an array's dtype, rank, layout,
    writability and alignment); False where there is no cheap check.

    numba internals: an array is checked by numba's type fingerprint of it (``numba._dispatcher``, what its
    dispatchers key their overloads by), plus its alignment, which the fingerprint leaves out."""
    kind = type(value)
    if kind in _CLASS_DECIDES or (isinstance(value, np.generic) and _plain_dtype(value.dtype)):
        return None
    if kind is int and numba_type == nt.int64:
        return fits_int64
    array = typing.cast("np.ndarray[typing.Any, np.dtype[typing.Any]]", value)  # read only when kind is np.ndarray
    if kind is np.ndarray and _plain_dtype(array.dtype):
        fingerprint, aligned = _dispatcher.compute_fingerprint(array), array.flags.aligned

        return lambda v: _dispatcher.compute_fingerprint(v) == fingerprint and v.flags.aligned == aligned
    return False


def type_name(t: object) -> str:
    """How overdub prints a type in messages: numba's name for concrete types, the lattice name otherwise."""
    return t.__qualname__ if isinstance(t, type) else str(t)
