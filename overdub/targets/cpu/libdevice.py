"""``cuda.libdevice`` on the CPU target: each of libdevice's functions, with the GPU's answer or refused.

On the CPU target a libdevice function compiled as the Python placeholder it is, typed ``none``. The CPU
target's root forwards each one to its namesake in :data:`LIBDEVICE` (target.py): an intrinsic taking
libdevice's signature (numba-cuda's ``libdevicefuncs`` table; arguments convert as numba converts them,
results given through pointers come back in a tuple) that computes

* what the GPU computes where that is exact: bit and integer operations, rounding, reinterpretations,
  conversions, IEEE arithmetic rounded to nearest (``_rn``);
* with the C library where the GPU's answer is an approximation (``exp``, ``sin``, ``lgamma``, ``j0``...), as
  numba's ``math`` functions do: both accurate to a few units in the last place, not bit for bit; a ``fast_``
  function gives the accurate answer;
* nothing where the CPU has no such operation: arithmetic in a directed rounding mode (``fadd_rz``,
  ``dmul_ru``, ``ll2float_rd``...), ``erfinv``, ``erfcinv``, ``normcdfinv`` and ``erfcx`` are refused where the
  kernel calls them, with an error naming the function, the kernel's line and the way out.
"""

from __future__ import annotations

import re
import types as pytypes
from typing import TYPE_CHECKING, TypeVar

from numba.core import types

from . import devicemath as dm

if TYPE_CHECKING:
    from numba.core.typing.templates import Signature

_V = TypeVar("_V")

# --- the table --------------------------------------------------------------------------------------------


def _named(*entries: tuple[str, _V]) -> dict[str, _V]:
    """{name: codegen} of (names, codegen) pairs: libdevice has a function of each name per type."""
    return {name: codegen for names, codegen in entries for name in names.split()}


# the same name in C, or the LLVM intrinsic named (instructions where the CPU has them); with a float variant
_C_FUNCTIONS = set(
    """acos acosh asin asinh atan atan2 atanh cbrt cos cosh erf erfc exp exp2 expm1 fdim fmod hypot ilogb j0 j1
    jn ldexp lgamma log log10 log1p log2 logb nextafter pow remainder scalbn sin sinh tan tanh tgamma y0 y1
    yn""".split()  # noqa: SIM905 (a list of 41 names, one a line, would not read as one)
)
_LLVM_FUNCTIONS = _named(
    *(
        (name, name)
        for name in ("sqrt", "fabs", "floor", "ceil", "trunc", "rint", "nearbyint", "round", "copysign", "fma")
    ),
    ("fmax", "maxnum"),
    ("fmin", "minnum"),
)
_OTHERS = _named(
    ("abs llabs", dm.integer_abs),
    ("max llmax", dm.extreme(">", True)),
    ("min llmin", dm.extreme("<", True)),
    ("umax ullmax", dm.extreme(">", False)),
    ("umin ullmin", dm.extreme("<", False)),
    ("brev brevll", dm.brev),
    ("clz clzll", dm.bit_count("ctlz")),
    ("popc popcll", dm.bit_count("ctpop")),
    ("ffs ffsll", dm.ffs),
    ("byte_perm", dm.byte_perm),
    ("mul24", dm.mul24(True)),
    ("umul24", dm.mul24(False)),
    ("mulhi mul64hi", dm.high_product(True)),
    ("umulhi umul64hi", dm.high_product(False)),
    ("hadd", dm.halving_add(True, False)),
    ("uhadd", dm.halving_add(False, False)),
    ("rhadd", dm.halving_add(True, True)),
    ("urhadd", dm.halving_add(False, True)),
    ("sad", dm.sad(True)),
    ("usad", dm.sad(False)),
    ("float_as_int int_as_float double_as_longlong longlong_as_double", dm.bitcast),
    ("double2hiint", dm.double_half(True)),
    ("double2loint", dm.double_half(False)),
    ("hiloint2double", dm.hiloint2double),
    ("half2float", dm.half2float),
    ("isnanf isnand", dm.int_result(dm.is_nan)),
    ("isinff isinfd", dm.int_result(dm.is_inf)),
    ("finitef isfinited", dm.int_result(dm.is_finite)),
    ("signbitf signbitd", dm.int_result(dm.sign_bit)),
    ("saturatef", dm.saturatef),
    ("llrint llrintf", dm.to_integer("rint", types.int64)),
    ("llround llroundf", dm.to_integer("round", types.int64)),
    *((name, dm.c_with_outputs(name)) for name in ("frexp", "frexpf", "modf", "modff", "remquo", "remquof")),
    ("sincos sincosf", dm.pair(dm.libm("sin"), dm.libm("cos"))),
    ("sincospi sincospif", dm.pair(dm.sinpi, dm.cospi)),
    ("sinpi sinpif", dm.sinpi),
    ("cospi cospif", dm.cospi),
    ("rsqrt rsqrtf", dm.reciprocal_of(dm.llvm_intrinsic("sqrt"))),
    ("rcbrt rcbrtf", dm.reciprocal_of(dm.libm("cbrt"))),
    ("exp10 exp10f", dm.exp10),
    ("powi powif", dm.powi),
    ("normcdf normcdff", dm.normcdf),
    ("fdividef", dm.arithmetic("fdiv")),  # fast_fdividef
)
_ROUNDINGS = {"rn": "rint", "rz": "trunc", "rd": "floor", "ru": "ceil"}
_INTEGERS: dict[str, types.Integer] = {"int": types.int32, "uint": types.uint32, "ll": types.int64, "ull": types.uint64}
_ROUNDED_TO_NEAREST = _named(
    ("fma_rn fmaf_rn", dm.llvm_intrinsic("fma")),
    ("frcp_rn drcp_rn", dm.reciprocal_of()),
    ("fsqrt_rn dsqrt_rn", dm.llvm_intrinsic("sqrt")),
    ("frsqrt_rn", dm.reciprocal_of(dm.llvm_intrinsic("sqrt"))),
    ("double2float_rn", dm.double2float_rn),
    ("float2half_rn", dm.float2half_rn),
)


def _rounded_to_nearest(name: str) -> dm.Codegen | None:
    """The codegen of a ``_rn`` function or conversion (the default rounding of the CPU's instructions), or
    None for one that is not."""
    found = re.fullmatch(r"(float|double)2(int|uint|ll|ull)_(r[nzdu])", name)
    if found:  # float to integer: any rounding, applied first
        return dm.to_integer(_ROUNDINGS[found[3]], _INTEGERS[found[2]])
    if not name.endswith("_rn"):
        return None
    found = re.fullmatch(r"(int|uint|ll|ull)2(float|double)_rn", name)
    if found:
        return dm.to_float(found[1] in ("int", "ll"))
    found = re.fullmatch(r"[fd](add|sub|mul|div)_rn", name)
    if found:
        return dm.arithmetic("f" + found[1])
    return _ROUNDED_TO_NEAREST.get(name)


_NO_C_FUNCTION = {"erfinv", "erfcinv", "normcdfinv", "erfcx"}


def implementation(name: str) -> dm.Codegen | None:
    """The codegen of libdevice's ``name`` on the CPU, or None (:func:`why_not`)."""
    name = name.removeprefix("fast_")  # the accurate function
    if name in _OTHERS:
        return _OTHERS[name]
    base = name.removesuffix("f") if name.removesuffix("f") in {*_LLVM_FUNCTIONS, *_C_FUNCTIONS} else name
    if base in _LLVM_FUNCTIONS:
        return dm.llvm_intrinsic(_LLVM_FUNCTIONS[base])
    if base in _C_FUNCTIONS:
        return dm.c_function(name)
    return _rounded_to_nearest(name)


def why_not(name: str) -> str:
    """Why libdevice's ``name`` has no implementation on the CPU."""
    if name.removesuffix("f") in _NO_C_FUNCTION:
        return "the CPU's C library has no such function"
    if re.search(r"_r[zdu]$", name):
        return "the CPU's arithmetic rounds to nearest only (this function rounds another way)"
    return "overdub does not implement it"


# --- the intrinsics ---------------------------------------------------------------------------------------


def _libdevice_function(name: str, sig: Signature) -> object:  # a numba intrinsic
    label = f"cuda.libdevice.{name}"
    codegen = implementation(name)
    typed = dm.typed_as(label, sig, codegen) if codegen is not None else dm.refused(label, why_not(name))
    return dm.fixed_arity_intrinsic(__name__, f"LIBDEVICE.{name}", len(sig.args), typed)


LIBDEVICE = pytypes.SimpleNamespace()
"""``numba.cuda.libdevice`` inside a CPU-target kernel (target.py forwards each function to its namesake), one
function for each of numba-cuda's once numba-cuda is imported (:func:`define`)."""


def define() -> None:
    """Fill :data:`LIBDEVICE` from numba-cuda's table of libdevice's functions and their types (as numba-cuda
    is imported: a kernel names libdevice's functions only after)."""
    from numba.cuda import libdevicefuncs

    for name, (retty, args) in libdevicefuncs.functions.items():
        setattr(LIBDEVICE, name[5:], _libdevice_function(name[5:], libdevicefuncs.create_signature(retty, args)))  # type: ignore[no-untyped-call]  # numba's is unannotated
