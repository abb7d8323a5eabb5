"""Integer semantics on the CPU target, with the GPU's answers: float to integer conversions, and signed
arithmetic that wraps.

A float converted to an integer (``int(x)``, ``numba.int32(x)``, a float stored into an integer array,
``math.floor(x)``, ``round(x)``) compiles to LLVM's ``fptosi``/``fptoui``, whose result is undefined where the
float lies outside the integer's range or is NaN: x86 gives the "integer indefinite" (INT64_MIN for inf, 1e30,
-inf and NaN alike). On the GPU the same code compiles to PTX ``cvt.rzi``, which saturates, so a kernel's
result would depend on its target. The CPU target converts as the GPU does (docs/compat.md):

* toward zero, clamped to the destination's range: inf and 1e30 give the largest value, -inf and -1e30 the
  smallest (0 for an unsigned integer);
* an 8-bit integer is converted as the GPU's code converts it -- ``cvt.rzi.s16``/``u16`` (PTX has no 8-bit
  register), then its low 8 bits -- so ``numba.int8(1000.0)`` is ``-24`` and ``numba.int8(inf)`` is ``-1``;
* NaN gives what the H200 gives (measured, tests/test_parity.py checks it on the GPU): from a float64, the
  conversion's sign bit alone -- INT16/32/64_MIN, or 2^15, 2^31, 2^63 unsigned -- so 0 for an 8-bit integer
  (the low 8 bits of it); from a float32, 0, except to a 64-bit integer (INT64_MIN, 2^63).

The conversions are registered with numba's CPU lowering for every pair of concrete float and integer types
(more specific than numba's own ``(Float, Integer)``, so they are chosen), and emit the saturating code only
while overdub builds a kernel or a method for the CPU target: numba programs outside overdub keep numba's
conversions. tests/test_gpu.py compares the two targets on every width.

Signed integer ``+``, ``-`` and ``*`` wrap, as numpy's int64 and the GPU's code do: numba lowers them with LLVM's
``nsw`` flag (``numba.cpython.numbers._int_arith_flags``), which makes an overflow poison that LLVM's optimizer
may fold to anything -- ``x + INT64_MAX > x`` became True for x = 1, a remainder of 8 came out as a 19-digit
number (found by the differential fuzzer, tests/test_fuzz_found.py); NVVM folds the same way on the GPU. In
kernels and methods overdub compiles, on both targets (numba-cuda lowers through numba's builtin registry, where
these are registered), they are lowered without it: more specific registrations than numba's
``(Integer, Integer)``. Julia's integers wrap the same way.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from llvmlite import ir
from numba.core import types
from numba.core.cpu import CPUContext
from numba.core.imputils import impl_ret_untracked, lower_builtin, lower_cast
from numba.cpython import builtins as numba_builtins
from numba.cpython import numbers as numba_numbers

from ... import world

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.templates import Signature

_Integer: TypeAlias = Any  # a numba Integer type: numba's stub of it omits bitwidth and signed

FLOATS = (types.float32, types.float64)
INTEGERS = (types.int8, types.int16, types.int32, types.int64, types.uint8, types.uint16, types.uint32, types.uint64)


def nan_result(float_bits: int, width: int, signed: bool) -> int:
    """What NaN converts to on the H200, by the float's width and the GPU conversion's (see the docstring)."""
    if float_bits == 32 and width < 64:
        return 0
    half: int = 2 ** (width - 1)  # (typeshed's int power is Any: a negative exponent gives a float)
    return -half if signed else half


def _in_kernel(context: BaseContext) -> bool:
    """Is this code generation overdub's, for the CPU target? (numba-cuda lowers with its own context.)"""
    return isinstance(context, CPUContext) and world.being_built() is not None


def saturating(builder: ir.IRBuilder, value: ir.Value, fromty: types.Float, toty: _Integer) -> ir.Value:
    """``value`` (of ``fromty``) converted to ``toty`` as the GPU's ``cvt.rzi`` converts it."""
    width = max(toty.bitwidth, 16)  # the width of the GPU's conversion
    wide = ir.IntType(width)
    kind = "fptosi" if toty.signed else "fptoui"
    intrinsic = builder.module.declare_intrinsic(
        f"llvm.{kind}.sat", [wide, value.type], ir.FunctionType(wide, [value.type])
    )
    result = builder.call(intrinsic, [value])  # toward zero, clamped; NaN gives 0
    nan = nan_result(fromty.bitwidth, width, toty.signed)
    if nan:
        is_nan = builder.fcmp_unordered("uno", value, value)
        result = builder.select(is_nan, ir.Constant(wide, nan & (2**width - 1)), result)
    return builder.trunc(result, ir.IntType(toty.bitwidth)) if width != toty.bitwidth else result


def _float_to_integer(
    context: BaseContext, builder: ir.IRBuilder, fromty: types.Float, toty: _Integer, value: ir.Value
) -> ir.Value:
    if _in_kernel(context):
        return saturating(builder, value, fromty, toty)
    if world.being_built() is not None and context.__class__.__module__.startswith("numba.cuda"):
        return cuda_conversion(builder, value, fromty, toty)
    return numba_numbers.float_to_integer(context, builder, fromty, toty, value)


def cuda_conversion(builder: ir.IRBuilder, value: ir.Value, fromty: types.Float, toty: _Integer) -> ir.Value:
    """``value`` converted to ``toty`` on CUDA by the NVVM intrinsic that is the GPU's ``cvt.rzi`` itself
    (``llvm.nvvm.d2ll.rz`` and the others), not LLVM's ``fptosi``: an out-of-range constant (``int(1e30)``) was
    folded by NVVM as poison -- the store dropped, or a garbage value (found by the differential fuzzer on the
    H200) -- where the instruction saturates. A 8- or 16-bit integer: the 32-bit conversion clamped to its range,
    NaN as the H200 gives it (the 16-bit conversion's sign bit from a float64), then the width's low bits."""
    source = "d" if fromty.bitwidth == 64 else "f"
    target = {(True, 64): "ll", (False, 64): "ull", (True, 32): "i", (False, 32): "ui"}
    width = 64 if toty.bitwidth == 64 else 32
    kind = target[toty.signed, width]
    wide = ir.IntType(width)
    intrinsic = builder.module.declare_intrinsic(
        f"llvm.nvvm.{source}2{kind}.rz", fnty=ir.FunctionType(wide, [value.type])
    )
    result = builder.call(intrinsic, [value])
    if toty.bitwidth >= 32:
        return result
    low, high = (-(2**15), 2**15 - 1) if toty.signed else (0, 2**16 - 1)
    compare = builder.icmp_signed if toty.signed else builder.icmp_unsigned
    result = builder.select(compare("<", result, ir.Constant(wide, low)), ir.Constant(wide, low), result)
    result = builder.select(compare(">", result, ir.Constant(wide, high)), ir.Constant(wide, high), result)
    nan = nan_result(fromty.bitwidth, 16, toty.signed)
    if nan:
        is_nan = builder.fcmp_unordered("uno", value, value)
        result = builder.select(is_nan, ir.Constant(wide, nan & (2**16 - 1)), result)
    return builder.trunc(result, ir.IntType(toty.bitwidth))


def _round(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """``round(x)`` of a float: numba's, its conversion to int64 the GPU's (numba converts with ``fptosi``).
    Registered in numba's builtin registry, which numba-cuda lowers through too: a CUDA context gets
    numba-cuda's own (``__nv_llrint``; NVVM refuses the ``llvm.rint`` of numba's)."""
    if not isinstance(context, CPUContext):
        from numba.cuda import cudaimpl  # (the CUDA target's: numba-cuda is imported when it compiles)

        return cudaimpl.ptx_round(context, builder, sig, args)
    if not _in_kernel(context):
        return numba_builtins.round_impl_unary(context, builder, sig, args)
    fltty = sig.args[0]
    llty = context.get_value_type(fltty)  # type: ignore[no-untyped-call]  # numba's is unannotated
    rint = builder.module.declare_intrinsic("llvm.rint", [llty])
    rounded = builder.call(rint, args)
    result = saturating(builder, rounded, fltty, sig.return_type)
    return impl_ret_untracked(context, builder, sig.return_type, result)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _round_digits(x: float, ndigits: int) -> float:
    """``round(x, ndigits)`` as numba-cuda computes it on the GPU: scaled in float64 (a float32 ``x`` too), the
    nearest integer with ties to even, scaled back -- ``round(float32(0.3425), 3)`` is 0.343 there, where
    numba's CPU code, computing in float32, gives 0.342."""
    if math.isinf(x) or math.isnan(x):
        return x
    if ndigits >= 0:
        scale, extra = (10.0 ** (ndigits - 22), 1e22) if ndigits > 22 else (10.0**ndigits, 1.0)
        y = (x * scale) * extra
        if math.isinf(y):
            return x
    else:
        scale, extra = 10.0 ** (-ndigits), 1.0
        y = x / scale
    z = float(round(y))
    if math.fabs(y - z) == 0.5:  # halfway: to even
        z = 2.0 * round(y / 2.0)
    return (z / extra) / scale if ndigits >= 0 else z * scale


def _round_to(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    """``round(x, ndigits)`` of a float: in kernels the GPU's answer (:func:`_round_digits`), numba's
    elsewhere; a CUDA context gets numba-cuda's own (this sits in numba's builtin registry, which numba-cuda
    lowers through too)."""
    if not isinstance(context, CPUContext):
        from numba.cuda import cudaimpl

        return cudaimpl.round_to_impl(context, builder, sig, args)
    if not _in_kernel(context):
        return numba_builtins.round_impl_binary(context, builder, sig, args)
    return context.compile_internal(builder, _round_digits, sig, args)  # type: ignore[no-untyped-call]  # numba's is unannotated


for _from in FLOATS:
    for _to in INTEGERS:
        lower_cast(_from, _to)(_float_to_integer)  # type: ignore[no-untyped-call]  # numba's is unannotated
    lower_builtin(round, _from)(_round)  # type: ignore[no-untyped-call]  # numba's is unannotated
    lower_builtin(round, _from, types.Integer)(_round_to)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _wrapping(operation: str, numba_impl: Callable[..., ir.Value]) -> Callable[..., ir.Value]:
    """Signed ``operation`` ("add", "sub", "mul") without ``nsw`` in code overdub compiles: an overflow wraps."""

    def impl(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        if world.being_built() is None:
            return numba_impl(context, builder, sig, args)
        a, b = (context.cast(builder, value, ty, sig.return_type) for value, ty in zip(args, sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
        return impl_ret_untracked(context, builder, sig.return_type, getattr(builder, operation)(a, b))  # type: ignore[no-untyped-call]  # numba's is unannotated

    return impl


for _ops, _operation, _numba_impl in (
    ((operator.add, operator.iadd), "add", numba_numbers.int_add_impl),
    ((operator.sub, operator.isub), "sub", numba_numbers.int_sub_impl),
    ((operator.mul, operator.imul), "mul", numba_numbers.int_mul_impl),
):
    for _op in _ops:
        for _signed in (types.int8, types.int16, types.int32, types.int64):
            lower_builtin(_op, _signed, _signed)(_wrapping(_operation, _numba_impl))  # type: ignore[no-untyped-call]  # numba's is unannotated
