"""A grid-stride loop without a division per thread on the CPU target.

``for i in range(cuda.grid(1), n, cuda.gridsize(1))`` -- numba-cuda's idiom for a kernel whose grid may be
smaller than its data -- makes a range whose step is known only at run time; numba's ``iter(range)`` computes
its length with a signed division (``(stop - start) // step``, and the remainder), 20-40 cycles, in every
thread. Where the grid covers the data, each thread's loop runs once, and that division was most of a thread's
time: 3 ns a thread for ``out[i] = 2 * x[i]`` against 0.2 ns for the same kernel written with ``if i < n``.

In kernels and methods overdub compiles for the CPU target, ``iter`` of a signed range first checks the case
of one iteration (``0 < stop - start <= step``) with two comparisons, and divides only otherwise, as numba
does (a zero step raises numba's ValueError). Registered with numba's CPU lowering for numba's range
types, after numba's own (the last registration of a signature is chosen); numba programs outside overdub,
and numba-cuda's lowering, keep numba's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numba.cpython.rangeobj  # noqa: F401  (numba's range lowering, registered before this module's)
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.cpu import CPUContext
from numba.core.imputils import builtin_registry, impl_ret_untracked, lower_builtin

from ... import world

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.templates import Signature

_Lowering = Callable[["BaseContext", ir.IRBuilder, "Signature", Sequence[ir.Value]], ir.Value]


def _numbas_getiter(state_type: types.Type) -> _Lowering:
    """numba's lowering of ``iter`` for ranges of ``state_type``."""
    for impl, func, sig in builtin_registry.functions:
        if func == "getiter" and tuple(sig) == (state_type,):
            lowering: _Lowering = impl
            return lowering
    raise LookupError(f"numba registers no getiter for {state_type}")  # pragma: no cover - numba's layout


def _one_step_first(state_type: types.Type, iter_type: types.Type) -> _Lowering:
    numbas = _numbas_getiter(state_type)
    range_state, range_iter = cgutils.create_struct_proxy(state_type), cgutils.create_struct_proxy(iter_type)  # type: ignore[no-untyped-call]  # numba's is unannotated

    def getiter(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        if not isinstance(context, CPUContext) or world.being_built() is None:
            return numbas(context, builder, sig, args)
        state: Any = range_state(context, builder, args[0])
        start, stop, step = state.start, state.stop, state.step
        iterator: Any = range_iter(context, builder)
        iterator.iter = cgutils.alloca_once_value(builder, start)  # type: ignore[no-untyped-call]  # numba's is unannotated
        iterator.stop, iterator.step = stop, step
        iterator.count = count = cgutils.alloca_once(builder, start.type)  # type: ignore[no-untyped-call]  # numba's is unannotated
        zero, one = ir.Constant(start.type, 0), ir.Constant(start.type, 1)
        diff = builder.sub(stop, start)
        positive = builder.icmp_signed(">", diff, zero)
        with builder.if_else(builder.and_(positive, builder.icmp_signed("<=", diff, step)), likely=True) as (
            once,
            otherwise,
        ):
            with once:
                builder.store(one, count)
            with otherwise:  # numba's length: none where the signs differ, else ceil(diff / step)
                with cgutils.if_unlikely(builder, builder.icmp_signed("==", step, zero)):  # type: ignore[no-untyped-call]  # numba's is unannotated
                    context.call_conv.return_user_exc(builder, ValueError, ("range() arg 3 must not be zero",))
                remainder = builder.srem(diff, step)
                uneven = builder.icmp_signed(">", builder.select(positive, remainder, builder.neg(remainder)), zero)
                length = builder.add(builder.sdiv(diff, step), builder.select(uneven, one, zero))
                signs_differ = builder.xor(positive, builder.icmp_signed(">", step, zero))
                builder.store(builder.select(signs_differ, zero, length), count)
        return impl_ret_untracked(context, builder, sig.return_type, iterator._getvalue())  # type: ignore[no-untyped-call]  # numba's is unannotated

    return getiter


for _state, _iter in (
    (types.range_state32_type, types.range_iter32_type),
    (types.range_state64_type, types.range_iter64_type),
):
    lower_builtin("getiter", _state)(_one_step_first(_state, _iter))  # type: ignore[no-untyped-call]  # numba's is unannotated
