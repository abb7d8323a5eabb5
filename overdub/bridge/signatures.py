"""Explicit signatures, as numba-cuda's decorator takes them and ``od.jit`` (:mod:`overdub.dropin`) does too:
the argument types of ``"void(float32[:], int64)"``, whether a launch's arguments fit those types, and its
scalars converted to them as numba-cuda converts them."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numba.core import sigutils, types
from numba.core.registry import cpu_target
from numba.core.typeconv.castgraph import Conversion
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
    if not isinstance(ty, types.Array):  # a numpy scalar has an __array_interface__ too: only arrays are refused
        arraylike = hasattr(value, "__cuda_array_interface__") or hasattr(value, "__array_interface__")
        return not arraylike or isinstance(value, np.generic)
    dtype: typing.Any = getattr(value, "dtype", None)  # whatever the value carries; from_dtype judges it
    try:
        return getattr(value, "ndim", None) == ty.ndim and numpy_support.from_dtype(dtype) == ty.dtype
    except Exception:  # a dtype numba does not know: no
        return False


def scalar_converter(ty: types.Type) -> Callable[[object], object] | None:
    """The conversion of a launch's value to the scalar type ``ty`` of an explicit signature, as numba-cuda
    converts it: a number becomes a numpy scalar of ``ty`` (wrapping, as a C cast does), other values pass
    unchanged; None where ``ty`` is not a number's type."""
    if not isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean)):
        return None
    dtype = numpy_support.as_dtype(ty)
    scalar = dtype.type
    bounds = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if dtype.kind in "iu" else None
    exact = {bool} if dtype.kind == "b" else {float, bool} if dtype == np.float64 else set()

    def convert(value: object) -> object:
        cls = type(value)
        if cls is scalar:  # already of the type: as it is
            return value
        if cls is int and bounds is not None and bounds[0] <= value <= bounds[1]:  # type: ignore[operator]
            return scalar(value)  # in range: no wrapping to do
        if cls in exact:
            return scalar(value)
        if isinstance(value, (int, float, complex, bool, np.generic)):
            return np.asarray(value).astype(dtype)[()]  # wraps, as a C cast does
        return value

    return convert


def sign_view(value: object, ty: types.Type) -> Callable[[object], object] | None:
    """Where ``value`` is an integer array of the other sign and the same width as the array type ``ty``, its
    view as ``ty``'s dtype (numba-cuda launches a kernel compiled for one signature with the array's memory as
    it is: ``uint32`` bits read as ``int32``); else None."""
    dtype = getattr(value, "dtype", None)
    if not isinstance(ty, types.Array) or not isinstance(ty.dtype, types.Integer) or not isinstance(dtype, np.dtype):
        return None
    wanted = numpy_support.as_dtype(ty.dtype)
    if dtype.kind not in "iu" or dtype.itemsize != wanted.itemsize or dtype == wanted or not hasattr(value, "view"):
        return None
    return functools.partial(_viewed_as, dtype=wanted)


def _viewed_as(value: typing.Any, dtype: np.dtype[typing.Any]) -> object:
    return value.view(dtype)


def as_scalar_of(value: object, ty: types.Type) -> object:
    """``value`` as a numpy scalar of the scalar type ``ty`` (:func:`scalar_converter`); other values unchanged."""
    convert = scalar_converter(ty)
    return value if convert is None else convert(value)


def chosen_signature(
    args: tuple[object, ...], signatures: list[tuple[types.Type, ...]], owner: object = None
) -> tuple[types.Type, ...] | None:
    """The signature of ``signatures`` that numba's dispatcher picks for a launch's ``args``: the one whose
    conversions rate best -- numba's rating: the fewest unsafe conversions (int64 to float32), then the fewest
    safe ones (int32 to float64), then the fewest promotions (int32 to int64); an exact match beats them all.
    None where no signature fits; a TypeError in numba's words, "Ambiguous overloading for ``owner``" (the
    function), where two rate the same.
    An array fits a signature's array of its rank and dtype; an int or a pointer fits a pointer."""
    rated = []
    for argtypes in signatures:
        rating = _rating(args, argtypes) if len(argtypes) == len(args) else None
        if rating is not None:
            rated.append((rating, argtypes))
    if not rated:
        return None
    best = min(rating for rating, _ in rated)
    tied = [argtypes for rating, argtypes in rated if rating == best]
    if len(tied) > 1:
        given = ", ".join(repr(typeof_or_none(value) or type(value).__name__) for value in args)
        candidates = "\n".join(f"({', '.join(map(repr, argtypes))}) -> none" for argtypes in tied)
        raise TypeError(f"Ambiguous overloading for {owner!r} ({given}):\n{candidates}")
    return tied[0]


def converted_signature(given: Sequence[object], signatures: Sequence[Sequence[object]]) -> Sequence[object] | None:
    """Of ``signatures`` (a numba-cuda device function's), the one a call of types ``given`` converts its
    arguments to, as numba types such a call: the fewest unsafe, then safe, then promoting conversions, the
    first listed of equals (numba lets a device function's call be ambiguous). None where none converts."""
    rated = []
    for index, declared in enumerate(signatures):
        if len(declared) != len(given):
            continue
        rating = _type_rating(given, declared)
        if rating is not None:
            rated.append((rating, index))
    return signatures[min(rated)[1]] if rated else None


def _type_rating(given: Sequence[object], declared: Sequence[object], unsafe: int = 0) -> tuple[int, int, int] | None:
    """(unsafe, safe, promoting) conversions of the types ``given`` to ``declared`` (``unsafe`` counted
    already), or None where one does not convert -- numba's rating of a signature."""
    counts = {Conversion.unsafe: unsafe, Conversion.safe: 0, Conversion.promote: 0}
    for actual, ty in zip(given, declared):
        try:
            conversion = cpu_target.typing_context.can_convert(actual, ty)
        except Exception:  # a type numba's conversions do not know (a pattern): no conversion
            return None
        if conversion is None or conversion == Conversion.nil:
            return None
        if conversion in counts:
            counts[conversion] += 1
    return counts[Conversion.unsafe], counts[Conversion.safe], counts[Conversion.promote]


def _rating(args: tuple[object, ...], argtypes: tuple[types.Type, ...]) -> tuple[int, int, int] | None:
    """:func:`_type_rating` of a launch's values: an array fits an array of its rank and dtype as it is, an
    int or a pointer a pointer; a value numba cannot type (a numba-cuda extension converts it) is passed as it
    is, rated last (as an unsafe conversion)."""
    given, declared, untyped = [], [], 0
    for value, ty in zip(args, argtypes):
        if isinstance(ty, PtrType):
            if (
                not (isinstance(value, (int, np.integer)) and not isinstance(value, bool))
                and typeof_or_none(value) != ty
            ):
                return None
        elif not array_fits(value, ty):
            return None
        elif not isinstance(ty, types.Array):
            actual = typeof_or_none(value)
            if actual is None:
                untyped += 1
            else:
                given.append(actual)
                declared.append(ty)
    return _type_rating(given, declared, untyped)
