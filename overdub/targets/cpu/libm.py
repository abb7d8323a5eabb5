"""The ``math`` functions numba-cuda compiles for kernels and numba's CPU target lacks, with CUDA's meaning.

numba-cuda implements ``math.fmod``, ``math.remainder`` and ``math.modf`` with libdevice; numba's CPU target
has no implementation of them, so a kernel calling one compiled for CUDA and failed on the CPU target. The
CPU target's root forwards them here (target.py). Their types are numba-cuda's (float32 arguments give
float32, any other numbers float64), and so are their answers -- C's, not Python's: no exception is raised,
``fmod(inf, y)``, ``fmod(x, 0)``, ``remainder(inf, y)`` and ``remainder(x, 0)`` are NaN, ``modf`` returns
``(fractional part, integral part)`` with ``modf(inf) == (0.0, inf)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"


def _float_type(*argtypes: types.Type) -> types.Float | None:
    """numba-cuda's signature rule for these functions: float32 where every argument is one, else float64
    (integers convert); None for anything else."""
    if not all(isinstance(t, (types.Integer, types.Float, types.Boolean)) for t in argtypes):
        return None
    return types.float32 if all(t == types.float32 for t in argtypes) else types.float64


@intrinsic
def fmod(typingctx: TypingContext, x: types.Type, y: types.Type) -> _Typed:
    """``math.fmod(x, y)``: ``x - n * y``, ``n`` the quotient truncated toward zero (C's fmod, LLVM's frem)."""
    result = _float_type(x, y)
    if result is None:
        return None

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        a, b = (context.cast(builder, v, t, result) for v, t in zip(args, sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
        return builder.frem(a, b)

    return result(x, y), codegen


@intrinsic
def remainder(typingctx: TypingContext, x: types.Type, y: types.Type) -> _Typed:
    """``math.remainder(x, y)``: IEEE 754's remainder, ``x - n * y`` with ``n`` the nearest integer to ``x / y``
    (ties to even): C's ``remainder``, from the C library."""
    result = _float_type(x, y)
    if result is None:
        return None

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        a, b = (context.cast(builder, v, t, result) for v, t in zip(args, sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
        llty = context.get_value_type(result)  # type: ignore[no-untyped-call]  # numba's is unannotated
        name = "remainderf" if result == types.float32 else "remainder"
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(llty, [llty, llty]), name)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return builder.call(function, [a, b])

    return result(x, y), codegen


@intrinsic
def modf(typingctx: TypingContext, x: types.Type) -> _Typed:
    """``math.modf(x)``: ``(fractional part, integral part)``, both with the sign of ``x``."""
    result = _float_type(x)
    if result is None:
        return None
    pair = types.UniTuple(result, 2)  # type: ignore[no-untyped-call]  # numba's is unannotated

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        value = context.cast(builder, args[0], sig.args[0], result)  # type: ignore[no-untyped-call]  # numba's is unannotated
        llty = value.type
        integral = builder.call(builder.module.declare_intrinsic("llvm.trunc", [llty]), [value])
        is_inf = builder.fcmp_ordered(
            "==",
            builder.call(builder.module.declare_intrinsic("llvm.fabs", [llty]), [value]),
            ir.Constant(llty, float("inf")),
        )
        fraction = builder.select(is_inf, ir.Constant(llty, 0.0), builder.fsub(value, integral))
        copysign = builder.module.declare_intrinsic("llvm.copysign", [llty], ir.FunctionType(llty, [llty, llty]))
        fraction = builder.call(copysign, [fraction, value])
        return context.make_tuple(builder, pair, (fraction, integral))  # type: ignore[no-untyped-call]  # numba's is unannotated

    return pair(x), codegen
