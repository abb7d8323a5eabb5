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
    └── Array[T, N]   (numba arrays of any layout; covariant in T, N optional)

``Ptr[T]`` with a concrete ``T`` is the concrete numba type :class:`PtrType` of pointer values; with an
abstract ``T`` it is a pattern matching every concrete pointer whose element type is a subtype of ``T``.
``Array[T, N]`` is always a pattern, since a concrete array type also fixes the layout.

:func:`issubtype` is the subtype relation over all of it; :func:`as_type` turns an annotation (including
Python's ``int``, ``float``, ``bool`` and ``complex``) into a lattice type.
"""
from __future__ import annotations

import inspect

import numba
from numba.core import types as nt
from numba.core.typing.typeof import Purpose

__all__ = [
    "AbstractType", "Any", "Number", "Integer", "Float", "Complex", "Boolean", "Ptr", "PtrType", "Array",
    "issubtype", "as_type", "is_concrete", "type_name", "typeof",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bool_",
]

int8, int16, int32, int64 = nt.int8, nt.int16, nt.int32, nt.int64
uint8, uint16, uint32, uint64 = nt.uint8, nt.uint16, nt.uint32, nt.uint64
float16, float32, float64 = nt.float16, nt.float32, nt.float64
complex64, complex128 = nt.complex64, nt.complex128
bool_ = nt.boolean


class AbstractType:
    """A node of the lattice that no value has as its exact type; it only annotates methods."""

    def __init__(self, name: str, parent: "AbstractType | None", numba_class: type | tuple | None = None):
        self.name = name
        self.parent = parent
        self._numba_class = numba_class   # concrete numba types of this class are its leaves

    def __reduce__(self):
        return _abstract_type, (self.name,)

    def contains(self, t: nt.Type) -> bool:
        """Is the concrete numba type ``t`` below this node?"""
        if self is Any:
            return True
        return self._numba_class is not None and isinstance(t, self._numba_class)

    def ancestors(self):
        node = self
        while node is not None:
            yield node
            node = node.parent

    def __repr__(self) -> str:
        return self.name


def _abstract_type(name: str) -> "AbstractType":
    """The lattice's abstract type called ``name`` (abstract types pickle by name)."""
    return globals()[name]


Any = AbstractType("Any", None)
Number = AbstractType("Number", Any, (nt.Integer, nt.Float, nt.Complex))
Integer = AbstractType("Integer", Number, nt.Integer)
Float = AbstractType("Float", Number, nt.Float)
Complex = AbstractType("Complex", Number, nt.Complex)
Boolean = AbstractType("Boolean", Any, nt.Boolean)


class PtrType(nt.Type):
    """The concrete numba type of a typed pointer to ``dtype`` elements (what ``od.pointer`` returns)."""

    def __init__(self, dtype: nt.Type):
        if not is_concrete(dtype):
            raise TypeError(f"PtrType needs a concrete element type, not {dtype!r}")
        self.dtype = dtype
        super().__init__(name=f"Ptr[{dtype}]")

    @property
    def key(self):
        return self.dtype


class PtrPattern:
    """``Ptr[T]`` for an abstract ``T``: every pointer whose element type is a subtype of ``T``."""

    __slots__ = ("eltype",)

    def __init__(self, eltype):
        self.eltype = eltype

    def __eq__(self, other):
        return isinstance(other, PtrPattern) and other.eltype == self.eltype

    def __hash__(self):
        return hash((PtrPattern, self.eltype))

    def __repr__(self):
        return f"Ptr[{type_name(self.eltype)}]"


class ArrayPattern:
    """``Array[T, N]``: numba arrays of any layout with element type below ``T`` and, if given, ``N`` dims."""

    __slots__ = ("eltype", "ndim")

    def __init__(self, eltype, ndim: int | None):
        self.eltype = eltype
        self.ndim = ndim

    def __eq__(self, other):
        return isinstance(other, ArrayPattern) and (other.eltype, other.ndim) == (self.eltype, self.ndim)

    def __hash__(self):
        return hash((ArrayPattern, self.eltype, self.ndim))

    def __repr__(self):
        dims = "" if self.ndim is None else f", {self.ndim}"
        return f"Array[{type_name(self.eltype)}{dims}]"


class _PtrConstructor:
    """``Ptr[T]``: the concrete :class:`PtrType` for a concrete ``T``, a pattern otherwise."""

    def __getitem__(self, eltype):
        eltype = as_type(eltype)
        return PtrType(eltype) if is_concrete(eltype) else PtrPattern(eltype)

    def __repr__(self):
        return "Ptr"


class _ArrayConstructor:
    """``Array[T]`` or ``Array[T, N]``: a pattern over numba array types."""

    def __getitem__(self, params):
        eltype, ndim = (params if isinstance(params, tuple) else (params, None))
        if ndim is not None and (not isinstance(ndim, int) or ndim < 0):
            raise TypeError(f"Array[T, N] needs a non-negative integer N, not {ndim!r}")
        return ArrayPattern(as_type(eltype), ndim)

    def __repr__(self):
        return "Array"


Ptr = _PtrConstructor()
Array = _ArrayConstructor()

_PYTHON_ANNOTATIONS = {int: Integer, float: Float, bool: Boolean, complex: Complex}


def as_type(annotation):
    """The lattice type an annotation means; unannotated parameters (``inspect.Parameter.empty``) are Any."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return Any
    if annotation in _PYTHON_ANNOTATIONS:
        return _PYTHON_ANNOTATIONS[annotation]
    if annotation is Ptr:
        return PtrPattern(Any)
    if annotation is Array:
        return ArrayPattern(Any, None)
    if isinstance(annotation, (AbstractType, PtrPattern, ArrayPattern, nt.Type)):
        return annotation
    raise TypeError(f"{annotation!r} is not an overdub type: use od.Any, od.Integer, od.Ptr[T], a numba type, "
                    f"or int/float/bool/complex")


def is_concrete(t) -> bool:
    """Is ``t`` a type some value can have exactly (a numba type), rather than an abstract pattern?"""
    return isinstance(t, nt.Type)


def issubtype(a, b) -> bool:
    """The subtype relation of the lattice: is every value of type ``a`` also of type ``b``?

    Both sides may be annotations (``int``, bare ``Ptr`` or ``Array``) as well as lattice types.
    """
    return subtype(as_type(a), as_type(b))


def subtype(a, b) -> bool:
    """:func:`issubtype` for lattice types already normalised by :func:`as_type` (the dispatch hot path)."""
    if a == b or b is Any:
        return True
    if isinstance(b, AbstractType):
        if isinstance(a, AbstractType):
            return any(node is b for node in a.ancestors())
        if isinstance(a, (PtrPattern, ArrayPattern)):
            return False
        return b.contains(a)
    if isinstance(b, PtrPattern):
        if isinstance(a, PtrType):
            return subtype(a.dtype, b.eltype)
        return isinstance(a, PtrPattern) and subtype(a.eltype, b.eltype)
    if isinstance(b, ArrayPattern):
        if isinstance(a, nt.Array):
            a_eltype, a_ndim = a.dtype, a.ndim
        elif isinstance(a, ArrayPattern):
            a_eltype, a_ndim = a.eltype, a.ndim
        else:
            return False
        return subtype(a_eltype, b.eltype) and (b.ndim is None or a_ndim == b.ndim)
    if isinstance(b, PtrType) and isinstance(a, PtrType):
        return a.dtype == b.dtype
    return False   # distinct concrete types, or an abstract type below a concrete one


def typeof(value) -> nt.Type:
    """The concrete type of a host value: the numba type a kernel argument of that value gets on the CPU."""
    return numba.typeof(value, Purpose.argument)


def type_name(t) -> str:
    """How overdub prints a type in messages: numba's name for concrete types, the lattice name otherwise."""
    return str(t)
