"""The type lattice as a static type checker reads it in annotations.

At run time ``od.Integer``, ``od.float32`` and ``od.Array[od.float32, 1]`` are values (overdub/types.py):
dispatch types, which a type checker refuses in an annotation ("is not valid as a type"). The public face
(overdub/__init__.py) imports this module's names in their place under ``TYPE_CHECKING``, so a kernel or a
method annotated with the lattice type-checks, and the objects dispatch uses are unchanged. The names mean
what a kernel receives:

- an abstract type is the union of the Python and NumPy scalars it admits (``Integer`` is ``int |
  np.integer``), as overdub reads ``int``, ``float``, ``bool`` and ``complex`` as the abstract types;
- a concrete scalar type is its NumPy scalar type (``float32`` is ``np.float32``), so ``od.float32(1)``, the
  cast, has the type a kernel sees;
- ``Array`` stands for a NumPy array: ``od.Array[T, N]`` becomes ``np.ndarray[tuple[int, ...N], np.dtype[T]]``
  through overdub.mypy_plugin, since no type checker accepts the number N as a type argument by itself;
- ``Ptr[T]`` is a pointer to T (``od.pointer``), read and written through ``od.unsafe_load`` and
  ``od.unsafe_store``.

Nothing here is imported at run time.
"""

from typing import Any, Generic, TypeVar

import numpy as np

__all__ = [
    "Any",
    "Number",
    "Integer",
    "Float",
    "Complex",
    "Boolean",
    "Ptr",
    "Array",
    "Callee",
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

Boolean = bool | np.bool_
Integer = int | np.integer[Any]
Float = float | np.floating[Any]
Complex = complex | np.complexfloating[Any, Any]
Number = Integer | Float | Complex

# one assignment a name: a type checker reads only `X = Y` as a type alias
int8 = np.int8
int16 = np.int16
int32 = np.int32
int64 = np.int64
uint8 = np.uint8
uint16 = np.uint16
uint32 = np.uint32
uint64 = np.uint64
float16 = np.float16
float32 = np.float32
float64 = np.float64
complex64 = np.complex64
complex128 = np.complex128
bool_ = np.bool_

_T = TypeVar("_T")


class Ptr(Generic[_T]):
    """A pointer to ``_T`` in device (or host) memory: ``od.pointer(array)``."""


class Array:
    """``Array[T, N]`` or ``Array[T]`` in an annotation: a NumPy array of ``T`` (overdub.mypy_plugin)."""


class Callee(Generic[_T]):
    """``Callee[f]`` or ``Callee`` in a hook of every call: the callee the hook observes (a function)."""
