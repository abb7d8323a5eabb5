"""Explicit signatures, as numba-cuda's decorator takes them and ``od.jit`` (:mod:`overdub.dropin`) does too:
the argument types of ``"void(float32[:], int64)"``, whether a launch's arguments fit those types, and its
scalars converted to them as numba-cuda converts them."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING

import numpy as np
from numba.core import sigutils, types
from numba.np import numpy_support

from ..types import PtrType, typeof

if TYPE_CHECKING:
    from numba.core.typing.templates import Signature


def signature_argtypes(signature: str | Signature) -> tuple[types.Type, ...]:
    """The argument types of a numba signature: a string ``"void(float32[:], int64)"`` or a signature object.
    numba's ``CPointer(T)`` is overdub's typed pointer ``Ptr[T]``: what a launch passes for an address."""
    argtypes: tuple[types.Type, ...] = sigutils.normalize_signature(signature)[0]  # type: ignore[no-untyped-call]  # numba's is unannotated
    return tuple(PtrType(ty.dtype) if isinstance(ty, types.CPointer) else ty for ty in argtypes)


def typeof_or_none(value: object) -> types.Type | None:
    """The numba type of ``value`` as a launch argument, or None where numba has none for it."""
    try:
        return typeof(value)
    except ValueError:
        return None


def array_fits(value: object, ty: types.Type) -> bool:
    """Can ``value`` be passed where a signature says ``ty``? (An array only where ``ty`` is an array of its
    rank and dtype; anything else only where ``ty`` is not an array.)"""
    if not isinstance(ty, types.Array):
        return not hasattr(value, "__cuda_array_interface__") and not hasattr(value, "__array_interface__")
    dtype: typing.Any = getattr(value, "dtype", None)  # whatever the value carries; from_dtype judges it
    try:
        return getattr(value, "ndim", None) == ty.ndim and numpy_support.from_dtype(dtype) == ty.dtype
    except Exception:  # a dtype numba does not know: no
        return False


def as_scalar_of(value: object, ty: types.Type) -> object:
    """``value`` as a numpy scalar of the scalar type ``ty`` (as numba-cuda converts a launch's arguments to an
    explicit signature); other values unchanged."""
    if isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean)) and isinstance(
        value, (int, float, complex, bool, np.generic)
    ):
        return np.asarray(value).astype(numpy_support.as_dtype(ty))[()]  # wraps, as a C cast does
    return value
