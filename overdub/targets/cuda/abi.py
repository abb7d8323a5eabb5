"""The CUDA parameter ABI: how each kind of launch argument is passed to a CUDA kernel.

numba-cuda compiles a kernel whose parameters are 8-byte slots: a scalar is one slot (padded), an array its
exploded fields, a struct or tuple its scalar leaves. Each argument kind of :mod:`overdub.arguments` says how
a value is *typed* (on every target); how it is *passed* on this target is said here, per kind, by a dispatch
on the kind (:func:`kind_slots`, :func:`native_spec`): a kind without an entry cannot be passed to a CUDA
kernel. From one layout per argument, a tuple of :class:`Slot`, derive

* the generated launch function's ``pack_into`` expressions (:func:`slot_values`, :func:`slot_format`);
* the native launch path's spec of each argument (:func:`native_spec`): a record with named fields
  (:class:`ScalarSpec`, :class:`PointerSpec`, :class:`ArraySpec`, :class:`ValueSpec`) that ``_fastlaunch.c``
  reads by attribute name -- the fields of each record are the extension's ``SPEC_FIELDS``, its scalar codes
  its ``SCALAR_CODES``, its parameter buffer ``MAX_SLOTS`` slots, each written once, in C
  (tests/test_fastlaunch.py checks Python's records against them);
* the bytes of a struct value (:func:`packer`): packed on the value's first native launch -- the native path
  calls the spec's ``pack`` where the value has none yet, and keeps them on the value -- never on another
  target, and never when the value is made.
"""

from __future__ import annotations

import functools
import math
import operator
import struct
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from numba.core import types as nt

from ... import arguments
from ...arguments import Argument, ArgumentKind
from ...runtime import runtime
from ...types import StructType, dtype_of
from ..nativespecs import PointerSpec, ScalarSpec

try:
    from ... import _fastlaunch
except ImportError:  # built without a C compiler: no native launch path, so no native specs
    _fastlaunch = None  # type: ignore[assignment]

__all__ = [
    "SLOT_CODES",
    "MAX_SLOTS",
    "Slot",
    "slots_of",
    "kind_slots",
    "value_slots",
    "slot_format",
    "slot_values",
    "interface_fields",
    "native_spec",
    "native_specs",
    "ScalarSpec",
    "PointerSpec",
    "ArraySpec",
    "ValueSpec",
    "packer",
]

# the struct code of each scalar's 8-byte parameter slot, padding included
SLOT_CODES = {
    "int8": "b7x",
    "int16": "h6x",
    "int32": "i4x",
    "int64": "q",
    "uint8": "B7x",
    "uint16": "H6x",
    "uint32": "I4x",
    "uint64": "Q",
    "float16": "e6x",
    "float32": "f4x",
    "float64": "d",
    "bool": "?7x",
}
MAX_SLOTS: int = _fastlaunch.MAX_SLOTS if _fastlaunch is not None else 0
"""The native launch path's parameter buffer, in slots (the extension's); a kernel taking more is launched by
its generated Python launch function."""
_NATIVE_SCALARS: frozenset[str] = frozenset(_fastlaunch.SCALAR_CODES if _fastlaunch is not None else ())


@dataclass(frozen=True, slots=True)
class Slot:
    """One 8-byte CUDA parameter slot of an argument: its struct format (padding included) and where its value
    is -- a constant, a path from the argument (attribute names and indexes, read in turn), or an element of
    what a ``helper`` computes once for several slots from the value at ``base``.

    To gain a mental model, consider a kernel taking a cupy array ``a`` (float32, 2 dimensions) and a tuple
    ``t = (n, z)`` of an int and a complex64. numba-cuda passes the array as its exploded fields and the tuple
    as its scalar leaves, each in slots of its own::

        code   "q"  "q"  "q"       "q"  "q"           "q"           "q"           "q"             "q"
        from    0    0   a.size     4   a.data.ptr    a.shape[0]    a.shape[1]    a.strides[0]    a.strides[1]

        code   "q"     "f4x"       "f4x"
        from   t[0]    t[1].real   t[1].imag

    The generated launch function packs exactly these expressions (:func:`slot_values`), a struct value packs
    its leaves by the same paths on its first native launch (:func:`packer`), and the native spec of each kind
    is read off the same slots. An array behind ``__cuda_array_interface__`` has its nine slots from one call,
    ``interface_fields(a, 4)``: slots with a ``helper`` (path ``(0,)`` to ``(8,)``)."""

    code: str
    path: tuple[int | str, ...] = ()
    constant: int | None = None
    helper: Callable[..., tuple[int, ...]] | None = None
    base: tuple[int | str, ...] = ()
    extra: tuple[object, ...] = ()  # the helper's further arguments

    def under(self, step: int | str) -> Slot:
        """This slot of an element (``step``: its index or attribute name) of a bigger argument."""
        if self.constant is not None:
            return self
        if self.helper is not None:
            return replace(self, base=(step, *self.base))
        return replace(self, path=(step, *self.path))


# --- each kind's slots -------------------------------------------------------------------------------------


def slots_of(argument: Argument) -> tuple[Slot, ...]:
    """An argument's CUDA parameter slots, refusing what has no kind (a value numba typed: no layout known)."""
    if argument.kind is None:
        raise TypeError(
            f"overdub cannot pass a {type(argument.value).__name__} (typed {argument.type}) to a CUDA kernel"
        )
    return kind_slots(argument.kind, argument.signature, argument.type)


@functools.singledispatch
def kind_slots(kind: ArgumentKind[Any, Any], signature: Any, ty: Any) -> tuple[Slot, ...]:
    """The CUDA parameter slots of values of ``kind`` with ``signature`` (typed ``ty``): the one layout the
    generated launch code, the struct packer and the native spec all derive from."""
    raise TypeError(f"overdub cannot pass a {kind.name} to a CUDA kernel")


def _scalar_code(ty: nt.Type) -> str:
    return SLOT_CODES["bool" if isinstance(ty, nt.Boolean) else str(ty)]


def value_slots(ty: nt.Type) -> tuple[Slot, ...]:
    """The slots of a value passed by value: numba-cuda flattens a struct (or tuple) argument into one kernel
    parameter per scalar leaf, in field order; a complex leaf is two."""
    if isinstance(ty, StructType):
        return tuple(slot.under(name) for name, ftype in ty.fields for slot in value_slots(ftype))
    if isinstance(ty, nt.BaseTuple):
        # every concrete numba tuple type iterates its element types; numba's stubs do not declare it on BaseTuple
        elements: enumerate[nt.Type] = enumerate(ty)  # type: ignore[arg-type]
        return tuple(slot.under(i) for i, etype in elements for slot in value_slots(etype))
    if isinstance(ty, nt.Complex):
        code = SLOT_CODES[str(ty.underlying_float)]
        return (Slot(code, ("real",)), Slot(code, ("imag",)))
    if isinstance(ty, (nt.Integer, nt.Float, nt.Boolean)):
        return (Slot(_scalar_code(ty)),)
    if isinstance(ty, nt.EnumMember):  # numba's enum model: its value's
        return tuple(slot.under("value") for slot in value_slots(ty.dtype))
    raise TypeError(f"overdub cannot pass a {ty} inside a struct or named tuple to a CUDA kernel")


@kind_slots.register(arguments.PythonInt)
@kind_slots.register(arguments.Scalar)
@kind_slots.register(arguments.EnumMemberArgument)
@kind_slots.register(arguments.StructArgument)
@kind_slots.register(arguments.NamedTupleArgument)
def _by_value(kind: ArgumentKind[Any, Any], signature: object, ty: nt.Type) -> tuple[Slot, ...]:
    return value_slots(ty)


@kind_slots.register
def _datetime(kind: arguments.DatetimeScalar, signature: object, ty: nt.Type) -> tuple[Slot, ...]:
    return (Slot("q", (0,), helper=units_count),)


def units_count(value: np.datetime64 | np.timedelta64) -> tuple[int]:
    """A datetime64 or timedelta64 as numba passes it: its count of its units, an int64 (NaT the least)."""
    return (int(value.astype(np.int64)),)


def _array_slots(ty: nt.Array) -> tuple[Slot, ...]:
    """numba's exploded array fields: meminfo, parent, nitems, itemsize, data, shape..., strides..."""
    ndim = ty.ndim
    return (
        Slot("q", constant=0),
        Slot("q", constant=0),
        Slot("q", ("size",)),
        Slot("q", constant=dtype_of(ty.dtype).itemsize),
        Slot("q", ("data", "ptr")),
        *(Slot("q", ("shape", i)) for i in range(ndim)),
        *(Slot("q", ("strides", i)) for i in range(ndim)),
    )


@kind_slots.register
def _cupy(kind: arguments.CupyArray, signature: object, ty: nt.Array) -> tuple[Slot, ...]:
    return _array_slots(ty)


@kind_slots.register
def _interface(kind: arguments.DeviceArray, signature: object, ty: nt.Array) -> tuple[Slot, ...]:
    itemsize = dtype_of(ty.dtype).itemsize
    count = len(_array_slots(ty))
    return tuple(Slot("q", (i,), helper=interface_fields, extra=(itemsize,)) for i in range(count))


def interface_fields(value: Any, itemsize: int) -> tuple[int, ...]:  # any __cuda_array_interface__ object
    """numba's exploded array fields for any ``__cuda_array_interface__`` object -- whose producer's stream, where
    the interface names one, is synchronized first (:func:`synchronize_producer`)."""
    interface = value.__cuda_array_interface__
    if interface.get("stream") is not None:
        synchronize_producer(value, interface["stream"])
    shape = interface["shape"]
    strides = interface.get("strides") or _c_strides(shape, itemsize)
    size = math.prod(shape)  # Python ints: a launch reads this for each array (np.prod costs microseconds)
    return (0, 0, size, itemsize, interface["data"][0], *shape, *strides)


def synchronize_producer(array: object, stream: int) -> None:
    """The ``__cuda_array_interface__`` (version 3) consumer's duty before a launch reads ``array``: wait for
    the producer's work on the ``stream`` its interface names, as numba-cuda does for a foreign array (under its
    ``CUDA_ARRAY_INTERFACE_SYNC``, on by default). numba-cuda's own device arrays are not foreign to it: it
    passes them as they are, and so does this."""
    from numba import cuda
    from numba.cuda.core import config  # type: ignore[import-not-found]
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if config.CUDA_ARRAY_INTERFACE_SYNC and not isinstance(array, DeviceNDArray):
        cuda.external_stream(stream).synchronize()


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides: list[int] = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


@kind_slots.register(arguments.PointerArgument)
@kind_slots.register(arguments.RecordArgument)
def _by_address(kind: ArgumentKind[Any, Any], signature: object, ty: nt.Type) -> tuple[Slot, ...]:
    return (Slot("Q", ("address",)),)


@kind_slots.register
def _tuple(kind: arguments.TupleArgument, signature: arguments.TupleSignature, ty: nt.BaseTuple) -> tuple[Slot, ...]:
    """A tuple's elements' slots one after another (as numba-cuda flattens it)."""
    return tuple(
        slot.under(i)
        # a numba tuple type iterates its element types (numba's stubs do not declare it on BaseTuple)
        for i, ((element_kind, element), element_ty) in enumerate(zip(signature, ty))  # type: ignore[call-overload]
        for slot in kind_slots(element_kind, element, element_ty)
    )


# --- the generated launch function's packing --------------------------------------------------------------


def slot_format(slots: Sequence[Slot]) -> str:
    """The struct format of ``slots``, little-endian."""
    return "<" + "".join(slot.code for slot in slots)


def _access(expression: str, path: tuple[int | str, ...]) -> str:
    return expression + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)


def slot_values(slots: Sequence[Slot], name: str, namespace: dict[str, object]) -> list[str]:
    """Python expressions of the slots' values for the argument variable ``name`` (a helper's run of slots is
    one starred call); ``namespace`` receives the helpers they call."""
    values: list[str] = []
    i = 0
    while i < len(slots):
        slot = slots[i]
        if slot.constant is not None:
            values.append(repr(slot.constant))
        elif slot.helper is None:
            values.append(_access(name, slot.path))
        else:
            group = (slot.helper, slot.base, slot.extra)
            end = i
            while end < len(slots) and (slots[end].helper, slots[end].base, slots[end].extra) == group:
                end += 1
            namespace[slot.helper.__name__] = slot.helper
            extra = "".join(f", {value!r}" for value in slot.extra)
            values.append(f"*{slot.helper.__name__}({_access(name, slot.base)}{extra})")
            i = end
            continue
        i += 1
    return values


# --- the native launch path's specs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """A cupy array of ``dtype``, rank ``ndim`` and ``layout`` ("C", "F", "A"), as numba's exploded array.
    ``exact``: its dtype must be this very object -- numpy's dtype equality is blind to which struct a record
    dtype is, so an array of records passes the native guard with its very dtype object only (any other takes
    the Python guard, ``struct_of``)."""

    kind: ClassVar[str] = "a"
    dtype: np.dtype[Any]
    ndim: int
    itemsize: int
    layout: str
    exact: bool


@dataclass(frozen=True, slots=True)
class ValueSpec:
    """A struct value of ``nslots`` slots, while its class's ``definition`` node is valid (a redefined class's
    values take the slow path, which refuses them); ``pack`` makes a value's bytes on its first launch."""

    kind: ClassVar[str] = "v"
    definition: object
    nslots: int
    pack: Callable[[object], bytes]


NativeSpec = ScalarSpec | PointerSpec | ArraySpec | ValueSpec


@functools.singledispatch
def native_spec(kind: ArgumentKind[Any, Any], signature: Any, slots: tuple[Slot, ...]) -> NativeSpec | None:
    """How ``_fastlaunch.c`` guards and marshals values of ``kind`` with ``signature`` (laid out in ``slots``),
    or None where it has no entry for them: the generated launch function serves."""
    return None


def native_specs(described: Sequence[Argument], slots: Sequence[tuple[Slot, ...]]) -> list[NativeSpec] | None:
    """The native spec of each of the ``described`` arguments (laid out in ``slots``): the records a native
    launcher is made with, or None where one argument has none."""
    specs = []
    for argument, arg_slots in zip(described, slots):
        spec = None if argument.kind is None else native_spec(argument.kind, argument.signature, arg_slots)
        if spec is None:
            return None
        specs.append(spec)
    return specs


@native_spec.register(arguments.PythonInt)
@native_spec.register(arguments.Scalar)
def _scalar_spec(kind: ArgumentKind[Any, Any], signature: object, slots: tuple[Slot, ...]) -> ScalarSpec | None:
    # a complex is two slots; float16 has no C conversion: both are packed in Python
    if len(slots) == 1 and slots[0].code[0] in _NATIVE_SCALARS:
        return ScalarSpec(slots[0].code[0])
    return None


@native_spec.register
def _pointer_spec(
    kind: arguments.PointerArgument, signature: tuple[np.dtype[Any], bool], slots: tuple[Slot, ...]
) -> PointerSpec:
    return PointerSpec(*signature)


@native_spec.register
def _array_spec(kind: arguments.CupyArray, signature: arguments.CupySignature, slots: tuple[Slot, ...]) -> ArraySpec:
    dtype, ndim, layout = signature
    return ArraySpec(dtype, ndim, dtype.itemsize, layout, dtype.fields is not None)


@native_spec.register
def _value_spec(kind: arguments.StructArgument, signature: StructType, slots: tuple[Slot, ...]) -> ValueSpec:
    return ValueSpec(signature.definition, len(slots), packer(signature))


# --- struct values' bytes ---------------------------------------------------------------------------------


def _reader(slot: Slot) -> Callable[[Any], Any]:
    """A function reading ``slot``'s value from an argument (no generated code: struct packers use it)."""
    if slot.constant is not None:

        def read_constant(value: Any, constant: int = slot.constant) -> int:
            return constant

        return read_constant
    steps: list[Callable[[Any], Any]] = [
        operator.itemgetter(s) if isinstance(s, int) else operator.attrgetter(s) for s in slot.path
    ]

    def read(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return read


def packer(struct_type: StructType) -> Callable[[object], bytes]:
    """The function packing a value of ``struct_type`` into its CUDA parameter slots' bytes (what the native
    path copies; a struct value is immutable, so it keeps them from its first launch on)."""
    made = _packers.get(struct_type)
    if made is None:
        slots = value_slots(struct_type)
        layout, readers = struct.Struct(slot_format(slots)), [_reader(slot) for slot in slots]

        def made(value: object) -> bytes:
            return layout.pack(*[read(value) for read in readers])

        _packers[struct_type] = made
    return made


_packers: weakref.WeakKeyDictionary[StructType, Callable[[object], bytes]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._packers", _packers)
