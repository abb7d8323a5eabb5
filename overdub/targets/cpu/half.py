"""float16 on the CPU target: numpy's float16 arrays in kernels, their arithmetic typed as numba-cuda types
it, and ``cuda.fp16``'s functions, with the GPU's answers.

numba's CPU target had no data model for float16 (any kernel touching a float16 array failed with a bare
``NotImplementedError: float16``); this module gives it LLVM's ``half``. numba-cuda types ``x + y``, ``x - y``,
``x * y``, ``x / y``, ``-x``, ``+x``, ``abs(x)`` of float16 values, and ``math.sin`` and the other functions
``numba.cuda.fp16`` binds (``_ol``), as float16; numba's CPU typing would promote them to float32 or float64.
So the same ones are overloaded for the CPU target (numba tries a target's own overloads first) with the
``cuda.fp16`` functions below, and the CPU target's root forwards ``numba.cuda.fp16``'s functions to those
(target.py). The data model and the overloads are numba's, for every CPU compile of the process: numba code
outside overdub, where float16 failed before, gets them too.

Each is computed in a wider format and rounded once to half: exactly the GPU's answer for ``+``, ``-``, ``*``,
``/``, ``sqrt`` (single precision holds every such result of two halves to the last bit a rounding needs) and
``fma`` (computed in double); the GPU's approximations (``hexp``, ``hsin``...) are single precision's functions
rounded to half. The rest of ``numba.cuda.fp16`` (conversions in a directed rounding mode, ``atomicAdd``...) is
refused where a kernel calls it, naming the function.
"""

from __future__ import annotations

import inspect
import math
import operator
import types as pytypes
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llvmlite import ir
from numba.core import (
    boxing,  # noqa: F401  (numba's boxing registered now, so that it is replaced below)
    types,
)
from numba.core.datamodel import models
from numba.core.datamodel.registry import default_manager
from numba.core.extending import overload
from numba.core.pythonapi import NativeValue, _boxers, _unboxers

from . import devicemath as dm

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.datamodel.manager import DataModelManager
    from numba.core.typing.templates import Signature

    from .devicemath import Codegen


# --- the data model -------------------------------------------------------------------------------------


class HalfModel(models.PrimitiveModel):
    """float16 as LLVM's ``half``."""

    def __init__(self, dmm: DataModelManager, fe_type: types.Type) -> None:
        super().__init__(dmm, fe_type, ir.HalfType())  # type: ignore[no-untyped-call]  # numba's is unannotated


_float_model = default_manager.lookup(types.float32).__class__  # type: ignore[no-untyped-call]  # numba's is unannotated


def _float_or_half_model(dmm: DataModelManager, fe_type: types.Type) -> models.DataModel:
    return HalfModel(dmm, fe_type) if fe_type == types.float16 else _float_model(dmm, fe_type)


default_manager.register(types.Float, _float_or_half_model)  # type: ignore[no-untyped-call]  # numba's own rejects float16

_numba_unbox_float = _unboxers.lookup(types.Float)  # type: ignore[no-untyped-call]  # numba's is unannotated
_numba_box_float = _boxers.lookup(types.Float)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _unbox_float_or_half(typ: types.Type, obj: ir.Value, c: Any) -> NativeValue:
    """A float argument from Python (a kernel's ``np.float16(3.0)``): a half through a double (exact for a
    value that is a half), numba's own unboxing (which asserts float32 or float64) for the others."""
    if typ != types.float16:
        return _numba_unbox_float(typ, obj, c)  # type: ignore[no-any-return]
    number = c.pyapi.number_float(obj)
    double = c.pyapi.float_as_double(number)
    c.pyapi.decref(number)
    # through single precision, exact for a half's value: LLVM lowers a double's truncation to half on x86-64
    # to a call of compiler-rt's __truncdfhf2, which numba's JIT does not link (the call jumped to address 0)
    single = c.builder.fptrunc(double, ir.FloatType())
    return NativeValue(c.builder.fptrunc(single, ir.HalfType()), is_error=c.pyapi.c_api_error())  # type: ignore[no-untyped-call]  # numba's is unannotated


def _box_float_or_half(typ: types.Type, val: ir.Value, c: Any) -> ir.Value:
    """A half to Python as a float (a host call's result), numba's own boxing for the others."""
    if typ != types.float16:
        return _numba_box_float(typ, val, c)
    return c.pyapi.float_from_double(c.builder.fpext(c.builder.fpext(val, ir.FloatType()), ir.DoubleType()))


# numba's registries refuse a second registration for a class: these replace numba's, which they call
_unboxers.functions[types.Float] = _unbox_float_or_half
_boxers.functions[types.Float] = _box_float_or_half


# --- cuda.fp16's functions -------------------------------------------------------------------------------

HALF = ir.HalfType()


def _in(wide: ir.Type, codegen: Codegen) -> Codegen:
    """``codegen`` computed on the arguments widened to ``wide``, rounded back to half."""

    def computed(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return builder.fptrunc(codegen(context, builder, sig, [builder.fpext(a, wide) for a in args]), HALF)

    return computed


def _single(codegen: Codegen) -> Codegen:
    return _in(ir.FloatType(), codegen)


def _compare(predicate: str, ordered: bool = True) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return (builder.fcmp_ordered if ordered else builder.fcmp_unordered)(predicate, *args)

    return codegen


def _saturated(codegen: Codegen) -> Codegen:
    """``codegen``'s result clamped to [0, 1], NaN giving 0 (``__hadd_sat``)."""

    def clamped(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return dm.saturatef(context, builder, sig, [codegen(context, builder, sig, args)])

    return clamped


def _relu(codegen: Codegen) -> Codegen:
    """max(0, result); NaN stays NaN (``__hfma_relu``)."""

    def clamped(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        value = codegen(context, builder, sig, args)
        negative = builder.fcmp_ordered("<", value, ir.Constant(HALF, 0.0))
        return builder.select(negative, ir.Constant(HALF, 0.0), value)

    return clamped


def _to_half(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    return builder.fptrunc(args[0], HALF)


def _bitcast_to(toty: types.Type) -> Codegen:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return builder.bitcast(args[0], context.get_value_type(toty))  # type: ignore[no-untyped-call]  # numba's is unannotated

    return codegen


_ADD, _SUB, _MUL, _DIV = (_single(dm.arithmetic(op)) for op in ("fadd", "fsub", "fmul", "fdiv"))
_FMA = _in(ir.DoubleType(), dm.llvm_intrinsic("fma"))
_BINARY: dict[str, Codegen] = {"hadd": _ADD, "hsub": _SUB, "hmul": _MUL, "hdiv": _DIV}
_BINARY |= {f"__{name}": codegen for name, codegen in _BINARY.items()}
_BINARY |= {"__hadd_rn": _ADD, "__hsub_rn": _SUB, "__hmul_rn": _MUL}
_BINARY |= {"__hadd_sat": _saturated(_ADD), "__hsub_sat": _saturated(_SUB), "__hmul_sat": _saturated(_MUL)}
_BINARY |= {  # NaN: the other argument (both NaN: NaN); +0 above -0
    "hmax": dm.llvm_intrinsic("maximumnum"),
    "hmin": dm.llvm_intrinsic("minimumnum"),
    "__hmax_nan": dm.llvm_intrinsic("maximum"),  # NaN: NaN
    "__hmin_nan": dm.llvm_intrinsic("minimum"),
}
_BINARY |= {"__hmax": _BINARY["hmax"], "__hmin": _BINARY["hmin"]}
_COMPARISONS = {
    name: _compare(predicate, ordered)
    for stem, predicate in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))
    for name, ordered in ((f"h{stem}", True), (f"__h{stem}", True), (f"__h{stem}u", False))
}
_UNARY: dict[str, Codegen] = {
    "hneg": lambda context, builder, sig, args: builder.fneg(args[0]),
    "habs": dm.llvm_intrinsic("fabs"),
    "hceil": dm.llvm_intrinsic("ceil"),
    "hfloor": dm.llvm_intrinsic("floor"),
    "htrunc": dm.llvm_intrinsic("trunc"),
    "hrint": dm.llvm_intrinsic("rint"),
    "hsqrt": _single(dm.llvm_intrinsic("sqrt")),
    "hrcp": _single(dm.reciprocal_of()),
    "hrsqrt": _single(dm.reciprocal_of(dm.llvm_intrinsic("sqrt"))),
    "hexp10": _single(dm.exp10),
    **{f"h{name}": _single(dm.libm(name)) for name in ("exp", "exp2", "log", "log2", "log10", "sin", "cos", "tanh")},
    "htanh_approx": _single(dm.libm("tanh")),
}
_UNARY |= {f"__{name}": _UNARY[name] for name in ("hneg", "habs")}


def _implementations() -> dict[str, tuple[Signature, Codegen]]:
    """name: (signature, codegen) of the functions of numba.cuda.fp16 the CPU target runs."""
    h = types.float16
    found = {name: (h(h, h), codegen) for name, codegen in _BINARY.items()}
    found |= {name: (types.boolean(h, h), codegen) for name, codegen in _COMPARISONS.items()}
    found |= {name: (h(h), codegen) for name, codegen in _UNARY.items()}
    found |= {name: (h(h, h, h), _FMA) for name in ("hfma", "__hfma")}
    found["__hfma_sat"] = (h(h, h, h), _saturated(_FMA))
    found["__hfma_relu"] = (h(h, h, h), _relu(_FMA))
    found["__hisnan"] = (types.boolean(h), lambda context, builder, sig, args: dm.is_nan(builder, args[0]))
    found["__float2half"] = found["__float2half_rn"] = (h(types.float32), _to_half)
    found["__double2half"] = (h(types.float64), _to_half)
    found["__half2float"] = (
        types.float32(h),
        lambda context, builder, sig, args: builder.fpext(args[0], ir.FloatType()),
    )
    found["__half_as_short"] = (types.int16(h), _bitcast_to(types.int16))
    found["__half_as_ushort"] = (types.uint16(h), _bitcast_to(types.uint16))
    found["__short_as_half"] = (h(types.int16), _bitcast_to(h))
    found["__ushort_as_half"] = (h(types.uint16), _bitcast_to(h))
    return found


def _fp16_function(name: str, sig: Signature, codegen: Codegen) -> Any:  # a numba intrinsic
    typed = dm.typed_as(f"cuda.fp16.{name}", sig, codegen)
    return dm.fixed_arity_intrinsic(__name__, f"FP16.{name}", len(sig.args), typed)


FP16 = pytypes.SimpleNamespace(**{name: _fp16_function(name, *found) for name, found in _implementations().items()})
"""``numba.cuda.fp16``'s functions inside a CPU-target kernel (target.py forwards each to its namesake)."""


def cpu_function(name: str, function: Callable[..., object]) -> Any:  # a numba intrinsic
    """What ``numba.cuda.fp16.<name>`` (the Python placeholder ``function``) means on the CPU target: its
    namesake in :data:`FP16`, or, for one the CPU target does not run, an intrinsic refusing it by name."""
    found = getattr(FP16, name, None)
    if found is None:
        arity = len(inspect.signature(function).parameters)
        found = dm.fixed_arity_intrinsic(
            __name__, f"FP16.{name}", arity, dm.refused(f"cuda.fp16.{name}", "overdub does not implement it")
        )
        setattr(FP16, name, found)
    return found


# --- float16 arithmetic typed as numba-cuda types it -----------------------------------------------------


def _half(*args: types.Type) -> bool:
    return all(a == types.float16 for a in args)


def _overload_binary(op: Callable[..., object], function: Callable[..., object]) -> None:
    @overload(op, target="cpu")
    def binary(a, b):  # type: ignore[no-untyped-def]  # bare: annotations change how numba's @overload matches (float16 ran in float)
        if _half(a, b):
            return lambda a, b: function(a, b)
        return None


def _overload_unary(op: Callable[..., object], function: Callable[..., object] | None) -> None:
    @overload(op, target="cpu")
    def unary(a):  # type: ignore[no-untyped-def]  # bare: annotations change how numba's @overload matches (float16 ran in float)
        if _half(a):
            return (lambda a: a) if function is None else (lambda a: function(a))
        return None


for _ops, _function in (
    ((operator.add, operator.iadd), FP16.hadd),
    ((operator.sub, operator.isub), FP16.hsub),
    ((operator.mul, operator.imul), FP16.hmul),
    ((operator.truediv, operator.itruediv), FP16.hdiv),
):
    for _op in _ops:
        _overload_binary(_op, _function)
for _unary_op, _unary in ((operator.neg, FP16.hneg), (operator.pos, None), (abs, FP16.habs)):
    _overload_unary(_unary_op, _unary)
for _name in ("trunc", "ceil", "floor", "fabs", "sqrt", "log", "log2", "log10", "exp", "exp2", "tanh", "cos", "sin"):
    _overload_unary(getattr(math, _name), getattr(FP16, {"fabs": "habs"}.get(_name, "h" + _name)))
