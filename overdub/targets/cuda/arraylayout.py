"""Where a cupy array keeps its fields, and a numpy scalar its value, for the native launch functions to read
them in place.

Reading a cupy array's ``dtype``, ``_c_contiguous``, ``shape``, ``strides`` and ``data.ptr`` through its
attributes builds a Python object per read (a tuple for the shape, an int for the pointer): about 0.25 us an
array on an H200's host, twice the driver's cost of a launch for 8 arrays. cupy's ``ndarray`` is a Cython class,
so these are fields of a C struct at fixed offsets -- which cupy does not publish. They are found here once per
process by reading probe arrays whose attributes are known, and handed to the extension
(``_fastlaunch.set_array_layout``) only when every field is found at exactly one offset on every probe and
reading there gives each probe's attributes back. When anything differs -- another cupy, another layout --
nothing is handed over, and launches read the attributes as before.

The search reads words of the probe objects, which are live Python objects of known size, and follows a word as
a pointer only when, on every probe, it and the word after it bound exactly as many 8-byte items as the probe
has dimensions (std::vector's begin and end) -- probes of 1, 2 and 3 dimensions, so no other field passes.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...runtime import runtime
from .abi import SLOT_CODES

WORD = 8
FIELDS = ("dtype", "c_contiguous", "f_contiguous", "shape", "strides", "data", "ptr")
"""The offsets handed to the extension, in its order."""


def _word(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


def _int32(address: int) -> int:
    return ctypes.c_int32.from_address(address).value


def _items(address: int, count: int) -> tuple[int, ...]:
    return tuple(ctypes.c_int64.from_address(address + WORD * i).value for i in range(count))


@dataclass(frozen=True)
class Probe:
    """What a probe array's attributes say, read the ordinary way: the addresses of its object and of its data
    pointer's object, the address of its dtype object, its pointer, shape, strides and contiguity flags."""

    address: int
    pointer_address: int
    dtype: int
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    c: int
    f: int

    @classmethod
    def of(cls, array: Any) -> Probe:
        flags = array.flags
        return cls(
            id(array),
            id(array.data),
            id(array.dtype),
            int(array.data.ptr),
            tuple(array.shape),
            tuple(array.strides),
            int(flags.c_contiguous),
            int(flags.f_contiguous),
        )

    def word(self, offset: int) -> int:
        return _word(self.address + offset)

    def bounds_vector(self, offset: int) -> bool:
        """Whether the words at ``offset`` could be a vector's begin and end: one 8-byte item per dimension."""
        begin, end, ndim = self.word(offset), self.word(offset + WORD), len(self.shape)
        return end - begin == WORD * ndim and (ndim == 0 or (begin != 0 and begin % WORD == 0))

    def vector(self, offset: int) -> tuple[int, ...]:
        """The items of the vector at ``offset`` (where every probe :meth:`bounds_vector` there)."""
        return _items(self.word(offset), len(self.shape))


def _only(offsets: list[int]) -> int | None:
    return offsets[0] if len(offsets) == 1 else None


def find(probes: Sequence[Probe], size: int, pointer_size: int) -> dict[str, int] | None:
    """The byte offsets of :data:`FIELDS` in objects of ``size`` bytes (their pointers' objects: of
    ``pointer_size``), each the one offset where every probe holds its value; None where a field has none or
    several. The probes must differ enough to tell the fields apart (:func:`probes`)."""
    words = range(2 * WORD, size - WORD + 1, WORD)  # past the reference count and the type

    def word_is(value_of: Callable[[Probe], int]) -> int | None:
        return _only([o for o in words if all(p.word(o) == value_of(p) for p in probes)])

    def vector_is(value_of: Callable[[Probe], tuple[int, ...]]) -> int | None:
        # followed as pointers only where every probe's words bound a vector of its rank
        candidates = [o for o in words if o + WORD < size and all(p.bounds_vector(o) for p in probes)]
        return _only([o for o in candidates if all(p.vector(o) == value_of(p) for p in probes)])

    def flag_is(value_of: Callable[[Probe], int]) -> int | None:
        return _only(
            [o for o in range(2 * WORD, size - 3, 4) if all(_int32(p.address + o) == value_of(p) for p in probes)]
        )

    found = {
        "dtype": word_is(lambda p: p.dtype),
        "c_contiguous": flag_is(lambda p: p.c),
        "f_contiguous": flag_is(lambda p: p.f),
        "shape": vector_is(lambda p: p.shape),
        "strides": vector_is(lambda p: p.strides),
        "data": word_is(lambda p: p.pointer_address),
        "ptr": _only(
            [
                o
                for o in range(2 * WORD, pointer_size - WORD + 1, WORD)
                if all(_word(p.pointer_address + o) == p.ptr for p in probes)
            ]
        ),
    }
    in_array = [offset for field, offset in found.items() if field != "ptr"]  # ptr: of the pointer's object
    if None in found.values() or len(set(in_array)) != len(in_array):
        return None
    return found  # type: ignore[return-value]  # no None among them


def probes(cupy: Any) -> list[Any]:
    """Arrays that tell the fields apart: 1, 2 and 3 dimensions; C-only, F-only, both and neither contiguous;
    shapes unlike their strides; dtypes and pointers of their own."""
    a = cupy.empty((2, 3), cupy.float32)  # C only; strides (12, 4)
    b = cupy.empty((5,), cupy.float64)  # C and F
    c = cupy.empty((2, 3, 4), cupy.int16)
    return [a, a.T, a[:, ::2], b, b[1::2], c, c.transpose(1, 0, 2)]


_outcome: dict[str, bool] = runtime.register_cache(
    f"{__name__}._outcome", {}, kept="a fact of this process's cupy, not of any definition"
)


def install(fastlaunch: Any) -> bool:
    """Whether the native launch functions read cupy arrays in place: the layout found and handed to
    ``fastlaunch`` (the extension) once per process, where cupy is imported and a device is current. False,
    and launches read the attributes, where it is not found -- and, not remembered, while cupy is not
    imported."""
    if "cupy" in _outcome:
        return _outcome["cupy"]
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return False
    try:
        arrays = probes(cupy)
        array_class, pointer_class = type(arrays[0]), type(arrays[0].data)
        found = find([Probe.of(a) for a in arrays], array_class.__basicsize__, pointer_class.__basicsize__)
    except Exception:  # another cupy's attributes, no device: the attributes serve
        found = None
    if found is not None:
        fastlaunch.set_array_layout(array_class, pointer_class, tuple(found[f] for f in FIELDS))
    _outcome["cupy"] = found is not None
    return _outcome["cupy"]


SCALAR_CODES = {
    np.dtype(name).type: code[0] for name, code in SLOT_CODES.items() if name != "float16"
}  # numpy's scalar types and the struct codes of their parameter slots


def scalar_layouts() -> list[tuple[type, str, int]]:
    """numpy's scalar types whose value lies right after the object's header -- checked on values of each --
    with their struct codes (numpy's scalars are ``{PyObject_HEAD; value}``; a type for which that does not
    hold is left out, and its scalars are converted)."""
    offset = object.__basicsize__
    found = []
    for scalar, code in SCALAR_CODES.items():
        values = [scalar(v) for v in (0, 1, 7, 100)] + ([scalar(-2.25), scalar(1e-3)] if code in "fd" else [])
        if all(ctypes.string_at(id(v) + offset, v.itemsize) == v.tobytes() for v in values):
            found.append((scalar, code, offset))
    return found
