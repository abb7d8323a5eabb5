"""Argument kinds: how each kind of kernel argument is typed, guarded and passed -- in one place per kind.

A launch function is made for one compiled kernel and the classes of one launch's arguments; later launches
with arguments of the same classes reuse it after its guards confirm that each argument still has the type
the kernel was compiled for. For that to be sound, the type must be a function of what the guard checks.
So each kind reads a value's *signature* -- the few properties its type rests on (an array's dtype, rank,
layout, read-only flag) -- and derives the numba type from the signature alone (:meth:`ArgumentKind.
numba_type`): the type a kernel is compiled for and the guard of its launch functions agree by construction.
These types are numba's own (numba-cuda puts the read-only flag into a device array's type; so do we).

How a value is *passed* is each target's business, asked of the target: on the CPU target numba's own
unboxing passes it; the CUDA target lays each kind out in parameter slots (:mod:`overdub.targets.cuda.abi`,
a dispatch on the kind, which this module does not import). Adding a kind is one class here plus, for the
CUDA target, its slots there (and, for the native path, one entry in the C table).

A value of no kind is typed by the target's numba typeof; its launches always take the slow path.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar, cast

import numba
import numpy as np
from numba.core import types as nt

from .intrinsics import Pointer, contiguity, interface_dtype
from .runtime import runtime
from .types import STRUCT_METADATA, PtrType, StructType, element_type, typeof

__all__ = [
    "Argument",
    "ArgumentKind",
    "describe",
    "HostMemoryError",
    "kind_of",
    "signature_guards",
    "refuse_container",
]

Layout: TypeAlias = Literal["C", "F", "A"]  # an array's layout: C- or Fortran-contiguous, or any strides
ArraySignature: TypeAlias = tuple[np.dtype[Any], int, Layout, bool]  # dtype, rank, layout, read-only


S = TypeVar("S")  # a kind's signatures
T = TypeVar("T", bound=nt.Type)  # a kind's numba types


class ArgumentKind(Generic[S, T]):
    """One kind of kernel argument. Subclasses say which values they take and how those are typed,
    guarded and passed: ``S`` is the type of their signatures, ``T`` that of their numba types. Their methods
    other than ``accepts`` take values it accepted (of any class, where a subclass's annotation says none)."""

    name = "argument"

    def memory(self, value: Any) -> str | None:
        """Where the value's data lives: "host", "device", or None for a value passed by value."""
        return None

    def accepts(self, value: object) -> bool:
        raise NotImplementedError

    def signature(self, value: Any) -> S:
        """The hashable properties the value's numba type rests on, read cheaply."""
        raise NotImplementedError

    def numba_type(self, signature: S) -> T:
        """The numba type of every value with this signature."""
        raise NotImplementedError

    def typeof(self, value: Any) -> T:
        return self.numba_type(self.signature(value))

    def guards(self, name: str, signature: S, consts: dict[str, object]) -> list[str]:
        """Python conditions over the argument variable ``name`` that hold exactly when the argument has
        ``signature`` (its class is already checked by the launch table's key). ``consts`` receives the
        values the conditions name."""
        return [f"signature_{self.name}({name}) == {name}_signature"]


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a kernel call, described once: its value, its kind (None where overdub has none: the
    target's numba typeof typed it, and no launch function made for it is cached), the kind's signature of the
    value, and its numba type -- a function of the signature, so the type a kernel is compiled for and the
    guards of its launch functions agree by construction."""

    value: object
    kind: ArgumentKind[Any, Any] | None
    signature: object
    type: nt.Type

    @classmethod
    def of_kind(cls, value: object, kind: ArgumentKind[Any, Any]) -> Argument:
        signature = kind.signature(value)
        return cls(value, kind, signature, kind.numba_type(signature))

    @classmethod
    def of_type(cls, ty: nt.Type) -> Argument:
        """An argument known only by its numba type (a reflection: ``od.code_ptx(kernel, float32[:])``)."""
        return cls(None, None, None, ty)


class PythonInt(ArgumentKind[str, nt.Integer]):
    """A Python ``int``: numba types it as int64, or as uint64 when it does not fit."""

    name = "python_int"

    def accepts(self, value: object) -> bool:
        return type(value) is int

    def signature(self, value: int) -> str:
        if not -(2**63) <= value < 2**64:
            raise OverflowError(
                f"the int {value} does not fit in 64 bits: a kernel takes an int from -2**63 to 2**63 - 1 "
                f"(int64), or to 2**64 - 1 (uint64); pass a float, or split the value"
            )
        return "int64" if value < 2**63 else "uint64"

    def numba_type(self, signature: str) -> nt.Integer:
        return nt.int64 if signature == "int64" else nt.uint64

    def guards(self, name: str, signature: str, consts: dict[str, object]) -> list[str]:
        return [f"-{2**63} <= {name} < {2**63}" if signature == "int64" else f"{2**63} <= {name} < {2**64}"]


class Scalar(ArgumentKind[type, nt.Type]):
    """A float, bool or complex, or a numpy number or bool: the class alone decides the type."""

    name = "scalar"
    _python: ClassVar[dict[type, nt.Type]] = {float: nt.float64, bool: nt.boolean, complex: nt.complex128}

    def accepts(self, value: object) -> bool:
        return type(value) in self._python or (
            isinstance(value, (np.number, np.bool_)) and not isinstance(value, np.timedelta64)
        )  # unit in the type

    def signature(self, value: object) -> type:
        return type(value)

    def numba_type(self, signature: type) -> nt.Type:
        return self._python.get(signature) or numba.from_dtype(np.dtype(signature))

    def guards(self, name: str, signature: type, consts: dict[str, object]) -> list[str]:
        return []


class EnumMemberArgument(ArgumentKind[type, nt.EnumMember]):
    """A member of an ``enum.Enum`` or ``enum.IntEnum`` class (of numbers, or tuples of them): numba types it by
    its class (its members' values unified), and passes its value."""

    name = "enum_member"

    def accepts(self, value: object) -> bool:
        return isinstance(value, enum.Enum)

    def signature(self, value: enum.Enum) -> type:
        return type(value)

    def numba_type(self, signature: type) -> nt.EnumMember:
        return cast("nt.EnumMember", typeof(next(iter(signature))))  # type: ignore[call-overload]

    def guards(self, name: str, signature: type, consts: dict[str, object]) -> list[str]:
        return []


class DatetimeScalar(ArgumentKind[np.dtype[Any], nt.Type]):
    """A ``numpy.datetime64`` or ``numpy.timedelta64``: typed by its dtype (the unit is part of the type),
    passed as its count of units."""

    name = "datetime"

    def accepts(self, value: object) -> bool:
        return isinstance(value, (np.datetime64, np.timedelta64))

    def signature(self, value: np.datetime64 | np.timedelta64) -> np.dtype[Any]:
        return value.dtype

    def numba_type(self, signature: np.dtype[Any]) -> nt.Type:
        return cast("nt.Type", numba.from_dtype(signature))


def _array_type(dtype: np.dtype[Any], ndim: int, layout: Layout, readonly: bool = False) -> nt.Array:
    element = element_type(dtype)
    if isinstance(element, StructType):
        element.check_current("pass an array of")
    return nt.Array(element, ndim, layout, readonly=readonly)


def struct_of(dtype: np.dtype[Any]) -> StructType | None:
    """The StructType a structured dtype's metadata names, or None. numpy's dtype equality ignores metadata, so
    an array guard compares this too: an array of another struct with the same fields, or a plain record
    array, is not the array a kernel was compiled for."""
    metadata = dtype.metadata
    struct_type: StructType | None = metadata.get(STRUCT_METADATA) if metadata else None
    return struct_type


def _struct_guard(name: str, dtype: np.dtype[Any], consts: dict[str, object]) -> list[str]:
    if dtype.fields is None:
        return []
    consts[f"{name}_struct"], consts["struct_of"] = struct_of(dtype), struct_of
    return [f"struct_of({name}.dtype) is {name}_struct"]


class NumpyArray(ArgumentKind[ArraySignature, nt.Array]):
    """A numpy array (host memory: the CPU target). numba types it by dtype, rank, layout (C before F) and
    whether it is writeable."""

    name = "numpy_array"

    def memory(self, value: np.ndarray[Any, Any]) -> str:
        return "host"

    def accepts(self, value: object) -> bool:
        # a masked array is none (its mask would be lost); numpy.ma unimported, there is none to ask about. Nor
        # is a numpy array the GPU reads in place -- numba-cuda's mapped and managed arrays, ndarrays with a
        # __cuda_array_interface__ -- which is a device array (a CUDA kernel takes it as it is, uncopied); the
        # CPU target's device arrays are numpy arrays with one too, in host memory (overdub_plain_memory)
        masked = sys.modules.get("numpy.ma")
        return (
            isinstance(value, np.ndarray)
            and not (masked is not None and isinstance(value, masked.MaskedArray))
            and (not hasattr(value, "__cuda_array_interface__") or hasattr(value, "overdub_plain_memory"))
        )

    def signature(self, value: np.ndarray[Any, Any]) -> ArraySignature:
        flags = value.flags
        layout: Layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
        return value.dtype, value.ndim, layout, not flags.writeable

    def numba_type(self, signature: ArraySignature) -> nt.Array:
        return _array_type(*signature)

    def guards(self, name: str, signature: ArraySignature, consts: dict[str, object]) -> list[str]:
        dtype, ndim, layout, readonly = signature
        consts[f"{name}_dtype"] = dtype
        c, f = f"{name}.flags.c_contiguous", f"{name}.flags.f_contiguous"
        return [
            f"({name}.dtype is {name}_dtype or {name}.dtype == {name}_dtype)",
            f"{name}.ndim == {ndim}",
            f"{name}.flags.writeable is {not readonly}",
            {"C": c, "F": f"(not {c} and {f})", "A": f"not ({c} or {f})"}[layout],
        ] + _struct_guard(name, dtype, consts)


CupySignature: TypeAlias = tuple[np.dtype[Any], int, Layout]  # dtype, rank, layout: never read-only


class CupyArray(ArgumentKind[CupySignature, nt.Array]):
    """A cupy array: dtype, rank and layout by cupy's own contiguity flags, never read-only."""

    name = "cupy_array"

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def memory(self, value: Any) -> str:  # a cupy.ndarray
        return "device"

    def accepts(self, value: object) -> bool:
        return type(value) is self.cls

    def signature(self, value: Any) -> CupySignature:  # a cupy.ndarray
        layout: Layout = "C" if value._c_contiguous else ("F" if value._f_contiguous else "A")
        return value.dtype, value.ndim, layout

    def numba_type(self, signature: CupySignature) -> nt.Array:
        return _array_type(*signature)

    def guards(self, name: str, signature: CupySignature, consts: dict[str, object]) -> list[str]:
        dtype, ndim, layout = signature
        consts[f"{name}_dtype"] = dtype
        c, f = f"{name}._c_contiguous", f"{name}._f_contiguous"
        return [
            f"({name}.dtype is {name}_dtype or {name}.dtype == {name}_dtype)",
            f"{name}.ndim == {ndim}",
            {"C": c, "F": f"(not {c} and {f})", "A": f"not ({c} or {f})"}[layout],
        ] + _struct_guard(name, dtype, consts)


class DeviceArray(ArgumentKind[ArraySignature, nt.Array]):
    """Any other ``__cuda_array_interface__`` object (numba device arrays, torch tensors, ...): typed from
    its interface -- typestr, rank, layout by exact strides, read-only flag."""

    name = "device_array"

    def memory(self, value: Any) -> str:
        return "device"

    def accepts(self, value: object) -> bool:
        return hasattr(value, "__cuda_array_interface__")

    def signature(self, value: Any) -> ArraySignature:  # any __cuda_array_interface__ object
        interface = value.__cuda_array_interface__
        shape, dtype = interface["shape"], interface_dtype(value, interface)
        c, f = contiguity(shape, interface.get("strides"), dtype.itemsize)
        return dtype, len(shape), "C" if c else ("F" if f else "A"), bool(interface["data"][1])

    def numba_type(self, signature: ArraySignature) -> nt.Array:
        return _array_type(*signature)


class PointerArgument(ArgumentKind[tuple[np.dtype[Any], bool], PtrType]):
    """An :class:`overdub.Pointer`: typed by its element dtype; where its memory is (host or device) is part
    of the signature, since each target takes only its own."""

    name = "pointer"

    def memory(self, value: Pointer) -> str:
        return "device" if value.device else "host"

    def accepts(self, value: object) -> bool:
        return isinstance(value, Pointer)

    def signature(self, value: Pointer) -> tuple[np.dtype[Any], bool]:
        return value.dtype, value.device

    def numba_type(self, signature: tuple[np.dtype[Any], bool]) -> PtrType:
        return PtrType(numba.from_dtype(signature[0]))

    def guards(self, name: str, signature: tuple[np.dtype[Any], bool], consts: dict[str, object]) -> list[str]:
        consts[f"{name}_dtype"] = signature[0]
        return [f"{name}.dtype == {name}_dtype", f"{name}.device is {signature[1]}"]


class HostRecord(ArgumentKind[np.dtype[Any], nt.Type]):
    """A record: a numpy structured scalar (``array[i]`` of a structured array), in host memory."""

    name = "host_record"

    def memory(self, value: np.void) -> str:
        return "host"

    def accepts(self, value: object) -> bool:
        return isinstance(value, np.void) and value.dtype.names is not None

    def signature(self, value: np.void) -> np.dtype[Any]:
        return value.dtype

    def numba_type(self, signature: np.dtype[Any]) -> nt.Type:
        ty: nt.Type = numba.from_dtype(signature)  # a record type
        return ty


class RecordOnDevice:
    """A record (a numpy structured scalar) copied to device memory for a launch: what a kernel parameter of a
    Record type receives, its address."""

    __slots__ = ("address", "dtype", "owner")

    def __init__(self, address: int, dtype: np.dtype[Any], owner: object) -> None:
        self.address, self.dtype, self.owner = int(address), dtype, owner


class RecordArgument(ArgumentKind[np.dtype[Any], nt.Type]):
    """A record in device memory (:class:`RecordOnDevice`): passed by address, typed by its dtype."""

    name = "record"

    def memory(self, value: RecordOnDevice) -> str:
        return "device"

    def accepts(self, value: object) -> bool:
        return isinstance(value, RecordOnDevice)

    def signature(self, value: RecordOnDevice) -> np.dtype[Any]:
        return value.dtype

    def numba_type(self, signature: np.dtype[Any]) -> nt.Type:
        ty: nt.Type = numba.from_dtype(signature)  # a record type
        return ty


class StructArgument(ArgumentKind[StructType, StructType]):
    """A value of an ``@od.struct`` class: its class fixes its type (and its fields' types, converted when it
    was made); passed by value, one parameter slot per field."""

    name = "struct"

    def accepts(self, value: object) -> bool:
        return isinstance(type(value).__dict__.get("__overdub_type__"), StructType)

    def signature(self, value: Any) -> StructType:  # a value of an @od.struct class
        struct_type: StructType = type(value).__overdub_type__
        struct_type.check_current("pass a value of")
        return struct_type

    def numba_type(self, signature: StructType) -> StructType:
        return signature

    def guards(self, name: str, signature: StructType, consts: dict[str, object]) -> list[str]:
        consts[f"{name}_definition"] = signature.definition
        return [f"{name}_definition.valid"]  # false once the class is redefined: the slow path refuses it


def _element_type(item: object) -> nt.Type:
    kind = kind_of(item)
    return kind.typeof(item) if kind is not None else typeof(item)


class NamedTupleArgument(ArgumentKind[tuple[type, tuple[nt.Type, ...]], nt.BaseTuple]):
    """A named tuple (``typing.NamedTuple``, ``collections.namedtuple``): numba types it by its class and its
    elements' types, as it types a tuple; passed by value like a struct."""

    name = "namedtuple"

    def accepts(self, value: object) -> bool:
        return isinstance(value, tuple) and hasattr(type(value), "_fields")

    def signature(self, value: tuple[object, ...]) -> tuple[type, tuple[nt.Type, ...]]:
        return type(value), tuple(_element_type(item) for item in value)

    def numba_type(self, signature: tuple[type, tuple[nt.Type, ...]]) -> nt.BaseTuple:
        cls, element_types = signature
        made: nt.BaseTuple = nt.BaseTuple.from_types(element_types, cls)  # type: ignore[no-untyped-call]  # numba's own, unannotated
        return made


TupleSignature: TypeAlias = tuple[tuple[ArgumentKind[Any, Any], Any] | None, ...]  # each element's kind and signature


class TupleArgument(ArgumentKind[TupleSignature, nt.BaseTuple]):
    """A tuple whose elements each have a kind (numbers, arrays, pointers, nested tuples): typed as numba's
    tuple of their types."""

    name = "tuple"

    def memory(self, value: tuple[object, ...]) -> str | None:
        # every element has a kind: the tuple was accepted
        places = {kind_of(element).memory(element) for element in value}  # type: ignore[union-attr]
        return "host" if "host" in places else "device" if "device" in places else None

    def accepts(self, value: object) -> bool:
        return type(value) is tuple and all(kind_of(element) is not None for element in value)

    def signature(self, value: tuple[object, ...]) -> TupleSignature:
        """The elements' kinds and signatures (a None where an element has no kind: no launch function
        made for tuples of kinds then applies)."""
        return tuple(
            (kind, kind.signature(element)) if kind is not None else None
            for kind, element in zip(map(kind_of, value), value)
        )

    # numba_type: of an accepted tuple's signature, where every element has a kind (no None)

    def numba_type(self, signature: TupleSignature) -> nt.BaseTuple:
        made: nt.BaseTuple = nt.BaseTuple.from_types(  # type: ignore[no-untyped-call]  # numba's own, unannotated
            [kind.numba_type(element) for kind, element in signature]  # type: ignore[misc]  # no None (above)
        )
        return made

    def typeof(self, value: tuple[object, ...]) -> nt.BaseTuple:
        return self.numba_type(self.signature(value))


def _cupy_ndarray() -> type | None:
    try:
        import cupy
    except Exception:  # cupy is optional; without it no value is a cupy array
        return None
    ndarray: type = cupy.ndarray
    return ndarray


_PYTHON_INT, _SCALAR, _NUMPY, _DEVICE, _POINTER = PythonInt(), Scalar(), NumpyArray(), DeviceArray(), PointerArgument()
_HOST_RECORD, _RECORD, _TUPLE = HostRecord(), RecordArgument(), TupleArgument()
_STRUCT, _NAMEDTUPLE, _ENUM, _DATETIME = StructArgument(), NamedTupleArgument(), EnumMemberArgument(), DatetimeScalar()
_by_class: dict[type, ArgumentKind[Any, Any] | None] = {}
runtime.register_cache(f"{__name__}._by_class", _by_class, kept="a pure function of the class")


def describe(
    value: object,
    typeof: Callable[[object], nt.Type],
    foreign: str,
    refuse: Callable[[object, ArgumentKind[Any, Any]], object],
) -> Argument:
    """``value`` described as a target takes it: by its kind, or -- a value of no kind -- typed by the target's
    ``typeof`` (a Python container refused). A value whose memory is the target's ``foreign`` one ("device"
    on the CPU, "host" on CUDA) is refused by ``refuse(value, kind)``, which raises."""
    kind = kind_of(value)
    if kind is None:
        ty = typeof(value)
        refuse_container(value, ty)
        return Argument(value, None, None, ty)
    if kind.memory(value) == foreign:
        refuse(value, kind)
    return Argument.of_kind(value, kind)


class HostMemoryError(TypeError):
    """A launch argument lives in host memory, which a CUDA kernel cannot read (the CUDA target's ``refuse``;
    ``od.jit`` catches it to copy host arrays as numba-cuda does)."""


def refuse_container(value: object, ty: nt.Type) -> None:
    """Raise where ``ty``, numba's type of the launch argument ``value``, is a Python container (list, set, dict):
    kernels are compiled without numba's runtime, which those need, and a GPU cannot read them."""
    if isinstance(ty, (nt.List, nt.Set, nt.DictType, nt.ListType)):
        raise TypeError(
            f"a {type(value).__name__} ({value!r:.60}) cannot be a kernel argument: pass a numpy (or "
            f"cupy) array -- np.asarray(...) -- or a tuple"
        )


def kind_of(value: object) -> ArgumentKind[Any, Any] | None:
    """The kind of a launch argument, or None when overdub has none for it (cached by class)."""
    cls = type(value)
    if cls is tuple:  # a tuple's kind depends on its elements, not its class
        return _TUPLE if _TUPLE.accepts(value) else None
    try:
        return _by_class[cls]
    except KeyError:
        pass
    cupy_ndarray = _cupy_ndarray()
    kinds: list[ArgumentKind[Any, Any]] = [
        _PYTHON_INT,
        _SCALAR,
        _NUMPY,
        _POINTER,
        _HOST_RECORD,
        _RECORD,
        _STRUCT,
        _NAMEDTUPLE,
        _ENUM,
        _DATETIME,
    ]
    if cupy_ndarray is not None:
        kinds.append(CupyArray(cupy_ndarray))
    kinds.append(_DEVICE)
    kind = _by_class[cls] = next((k for k in kinds if k.accepts(value)), None)
    return kind


def signature_guards(names: Sequence[str], described: Sequence[Argument]) -> tuple[list[str], dict[str, object]] | None:
    """The guard conditions (and the constants they name) under which arguments of the same classes as the
    ``described`` ones (:class:`Argument`) have their types; None when some argument has no kind."""
    conditions: list[str] = []
    consts: dict[str, object] = {}
    for name, argument in zip(names, described):
        kind, signature = argument.kind, argument.signature
        if kind is None:
            return None
        conditions += kind.guards(name, signature, consts)
        consts[f"{name}_signature"] = signature
        consts[f"signature_{kind.name}"] = kind.signature
    return conditions, consts
