"""The grid state on the CPU target: what ``cuda.threadIdx``, ``cuda.blockIdx``, ``cuda.blockDim``,
``cuda.gridDim``, ``cuda.grid``, ``cuda.gridsize`` and ``cuda.laneid`` read.

Twelve int64 slots: threadIdx.xyz 0-2, blockIdx.xyz 3-5, blockDim.xyz 6-8, gridDim.xyz 9-11. A grid body
(:mod:`.cpu_grid`) sets them (``set_slot``) in a local array that LLVM keeps in registers; callees compiled on
their own read the running thread's slots in memory, through the runner's ``od_state``.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic, models, register_model, typeof_impl
from numba.core.imputils import lower_cast, lower_constant, lower_getattr
from numba.core.typeconv.castgraph import Conversion
from numba.core.typing.templates import AttributeTemplate, infer_getattr

from ... import world
from . import runner
from .runner import Need, native_call

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from ...bindings import Guarded

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"


# The kernel is inlined (at numba IR level) into its grid body, so the reads in its own body find the body's
# local copy of the state, which LLVM keeps in registers: thread indices are plain loop variables there, and
# the loops vectorise. Callees compiled on their own read the running thread's slots through the runner's
# od_state (a fiber's own, or its worker's); a kernel that reaches such a callee "needs" the state in
# memory, and only then does its grid loop store it there as well (a thread body's fibers have it there).

_GRID_STATE = np.zeros(12, dtype=np.int64)
_GRID_STATE_SYMBOL = "overdub_grid_state"
llvm.add_symbol(_GRID_STATE_SYMBOL, _GRID_STATE.ctypes.data)
_I64 = ir.IntType(64)
_LOCAL_STATE = "overdub.grid_state"


def _global_slot(builder: ir.IRBuilder, slot: int) -> ir.Value:
    """The running thread's slot: the runner's state of the current fiber or worker (a fixed array where the
    runner is not built, and blocks run on the calling thread only). Both are reached by external symbols,
    which the JIT resolves in this process, so that code loaded from the disk cache finds this process's."""
    if runner.SYMBOLS is None:
        try:
            state = builder.module.get_global(_GRID_STATE_SYMBOL)
        except KeyError:
            state = ir.GlobalVariable(builder.module, ir.ArrayType(_I64, 12), _GRID_STATE_SYMBOL)  # external
        return _local_slot(builder, state, slot)
    state = native_call(builder, "state", _I64.as_pointer(), [])
    # the same pointer at every call of a thread's code (a fiber switched away and back finds its own again):
    # said so, LLVM reads it once, not once a slot
    state.callee.attributes.update(("readnone", "nounwind", "willreturn"))
    return builder.gep(state, [ir.Constant(_I64, slot)])


def _local_state(builder: ir.IRBuilder) -> ir.Instruction | None:
    """The grid loop's local copy of the state, when the code being generated is inlined in a grid loop."""
    for instruction in builder.function.entry_basic_block.instructions:
        if instruction.name == _LOCAL_STATE:
            return instruction
    return None


def _local_slot(builder: ir.IRBuilder, state: ir.Value, slot: int) -> ir.Value:
    return builder.gep(state, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), slot)])


@intrinsic
def set_slot(typingctx: TypingContext, slot: types.Type, value: types.Type) -> _Typed:
    if not isinstance(slot, types.IntegerLiteral):
        return None
    index = slot.literal_value

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        _store_slot(builder, index, context.cast(builder, args[1], sig.args[1], types.int64))  # type: ignore[no-untyped-call]  # numba's is unannotated
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(slot, types.unliteral(value)), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def set_x(typingctx: TypingContext, x: types.Type, first: types.Type, bx: types.Type) -> _Typed:
    """In a row loop running the threads of a row by their global x index ``x`` from ``first``: set the
    block's x index to ``first // bx`` (one division a row, LLVM hoists it) and the thread's to what makes
    their sum ``x`` (see :attr:`~.runner.Need.BLOCK_ROWS`)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        value, start, width = (context.cast(builder, arg, ty, types.int64) for arg, ty in zip(args, sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
        builder.assume(builder.icmp_signed(">=", value, ir.Constant(_I64, 0)))
        block = builder.udiv(start, width)
        _store_slot(builder, 3, block)
        _store_slot(builder, 0, builder.sub(value, builder.mul(block, width, flags=["nsw", "nuw"]), flags=["nsw"]))
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def set_row(typingctx: TypingContext, row: types.Type, by: types.Type, bz: types.Type, gy: types.Type) -> _Typed:
    """In a row loop: set the thread's and the block's y and z indices from the row's number,
    ``(j + gy * k) * by * bz + ty + by * tz`` (the runner's numbering)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        row, by, bz, gy = (context.cast(builder, arg, ty, types.int64) for arg, ty in zip(args, sig.args))  # type: ignore[no-untyped-call]  # numba's is unannotated
        rows = builder.mul(by, bz, flags=["nsw", "nuw"])
        run, thread = builder.udiv(row, rows), builder.urem(row, rows)
        for slot, value in (
            (1, builder.urem(thread, by)),
            (2, builder.udiv(thread, by)),
            (4, builder.urem(run, gy)),
            (5, builder.udiv(run, gy)),
        ):
            _store_slot(builder, slot, value)
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(types.int64, types.int64, types.int64, types.int64), codegen


EXTENTS = range(6, 12)
"""The slots of the block's and the grid's extents (``blockDim``, ``gridDim``): at least 1 wherever a thread runs."""


def _store_slot(builder: ir.IRBuilder, index: int, value: ir.Value) -> None:
    # every index is >= 0 and every extent >= 1: said so, LLVM drops numba's negative-index handling and
    # vectorises, and a grid-stride loop's range(start, n, cuda.gridsize(1)) loses its "step is zero" raise
    least = 1 if index in EXTENTS else 0
    builder.assume(builder.icmp_signed(">=", value, ir.Constant(_I64, least)))
    state = _local_state(builder) or cgutils.alloca_once(builder, ir.ArrayType(_I64, 12), name=_LOCAL_STATE)  # type: ignore[no-untyped-call]  # numba's is unannotated
    builder.store(value, _local_slot(builder, state, index))
    built = typing.cast("Guarded | None", world.being_built())  # at code generation: a compile's node
    if built is not None and Need.GRID_STATE in built.needs:
        builder.store(value, _global_slot(builder, index))


def read_slot(builder: ir.IRBuilder, slot: int, apart: bool = True) -> ir.Value:
    """The value of ``slot`` for the running thread. A read of the thread's or the block's x index on its own
    (``apart``; not ``cuda.grid``'s, which only needs their sum) makes the kernel need the runner's
    :attr:`~.runner.Need.BLOCK_ROWS`."""
    built = typing.cast("Guarded | None", world.being_built())  # at code generation: a compile's node
    if apart and slot in (0, 3) and built is not None:
        built.needs.add(Need.BLOCK_ROWS)
    state = _local_state(builder)
    if state is not None:
        return builder.load(_local_slot(builder, state, slot))
    if built is not None:
        built.needs.add(Need.GRID_STATE)
    return builder.load(_global_slot(builder, slot))


class Dim3Type(types.Type):
    """``threadIdx`` / ``blockIdx`` / ``blockDim`` / ``gridDim`` on the CPU: x, y, z read the grid state."""

    def __init__(self, first_slot: int, name: str) -> None:
        self.first_slot = first_slot
        super().__init__(name=f"cpu.{name}")


class Dim3:
    def __init__(self, first_slot: int, name: str) -> None:
        self.type = Dim3Type(first_slot, name)


@typeof_impl.register(Dim3)
def _typeof_dim3(value: Dim3, c: object) -> Dim3Type:
    return value.type


register_model(Dim3Type)(models.OpaqueModel)


@lower_constant(Dim3Type)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _lower_dim3(context: BaseContext, builder: ir.IRBuilder, ty: Dim3Type, pyval: Dim3) -> ir.Value:
    return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated


@infer_getattr
class _Dim3Attributes(AttributeTemplate):
    key = Dim3Type

    def generic_resolve(self, typ: Dim3Type, attr: str) -> types.Type | None:  # type: ignore[override]  # numba declares it NotImplemented
        if attr in ("x", "y", "z"):
            return types.int32
        return None


def _dim3_component(offset: int) -> Callable[[BaseContext, ir.IRBuilder, Dim3Type, ir.Value], ir.Value]:
    def lower(context: BaseContext, builder: ir.IRBuilder, typ: Dim3Type, value: ir.Value) -> ir.Value:
        return builder.trunc(read_slot(builder, typ.first_slot + offset), ir.IntType(32))

    return lower


for _offset, _attr in enumerate("xyz"):
    lower_getattr(Dim3Type, _attr)(_dim3_component(_offset))  # type: ignore[no-untyped-call]  # numba's is unannotated


def _grid_type(ndim: types.Type) -> types.Type | None:
    if not isinstance(ndim, types.IntegerLiteral) or ndim.literal_value not in (1, 2, 3):
        return None
    n = ndim.literal_value
    return types.int64 if n == 1 else types.UniTuple(types.int64, n)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _tuple_or_scalar(
    context: BaseContext, builder: ir.IRBuilder, restype: types.Type, values: list[ir.Value]
) -> ir.Value:
    if restype == types.int64:
        return values[0]
    return context.make_tuple(builder, restype, values)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _grid_intrinsic(name: str, per_dimension: Callable[[ir.IRBuilder, int], ir.Value]) -> Any:
    """An intrinsic ``name(ndim)`` (``ndim`` a constant 1, 2 or 3) returning ``per_dimension(builder, d)`` for
    each dimension: an int64 for one dimension, a tuple for more, as ``cuda.grid`` and ``cuda.gridsize``."""

    def grid_function(typingctx: TypingContext, ndim: types.Type) -> _Typed:
        restype = _grid_type(ndim)
        if restype is None:
            return None
        assert isinstance(ndim, types.IntegerLiteral)

        def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
            values = [per_dimension(builder, d) for d in range(ndim.literal_value)]
            return _tuple_or_scalar(context, builder, sig.return_type, values)

        return restype(ndim), codegen

    grid_function.__name__ = grid_function.__qualname__ = name
    return intrinsic(grid_function)


class LaneIdType(types.Type):
    """``cuda.laneid`` on the CPU: converts to an int32, the thread's lane (its linear index in the block,
    modulo 32), wherever an integer is expected (numba's conversion rules; ``lower_cast`` computes it)."""

    def __init__(self) -> None:
        super().__init__(name="cpu.laneid")

    def can_convert_to(self, typingctx: TypingContext, other: types.Type) -> Conversion | None:
        if isinstance(other, types.Integer):
            wide: bool = other.bitwidth >= 32 and other.signed  # type: ignore[attr-defined]  # numba's stub of Integer omits them
            return Conversion.safe if wide else Conversion.unsafe
        if isinstance(other, types.Float):
            return Conversion.safe
        return None


class LaneId:
    type = LaneIdType()


register_model(LaneIdType)(models.OpaqueModel)
typeof_impl.register(LaneId)(lambda value, c: value.type)
lower_constant(LaneIdType)(lambda context, builder, ty, pyval: context.get_dummy_value())  # type: ignore[no-untyped-call]  # numba's is unannotated


@lower_cast(LaneIdType, types.Number)  # type: ignore[no-untyped-call, untyped-decorator]  # numba's lowering registry is unannotated
def _laneid_value(
    context: BaseContext, builder: ir.IRBuilder, fromty: LaneIdType, toty: types.Type, value: ir.Value
) -> ir.Value:
    x, y, z = (read_slot(builder, slot) for slot in range(3))
    bx, by = read_slot(builder, 6), read_slot(builder, 7)
    linear = builder.add(x, builder.mul(bx, builder.add(y, builder.mul(by, z))))
    lane = builder.trunc(builder.and_(linear, ir.Constant(_I64, 31)), ir.IntType(32))
    return context.cast(builder, lane, types.int32, toty)  # type: ignore[no-untyped-call]  # numba's is unannotated


# no signed wrap: lets LLVM see indices are non-negative and drop numba's negative-index handling
grid = _grid_intrinsic(
    "grid",
    lambda builder, d: builder.add(
        builder.mul(read_slot(builder, 3 + d, apart=False), read_slot(builder, 6 + d), flags=["nsw"]),
        read_slot(builder, d, apart=False),
        flags=["nsw"],
    ),
)
gridsize = _grid_intrinsic(
    "gridsize", lambda builder, d: builder.mul(read_slot(builder, 6 + d), read_slot(builder, 9 + d), flags=["nsw"])
)


# module variables: another process finds them by these names (the disk cache)
threadIdx, blockIdx = Dim3(0, "threadIdx"), Dim3(3, "blockIdx")
blockDim, gridDim = Dim3(6, "blockDim"), Dim3(9, "gridDim")
laneid = LaneId()


@intrinsic
def fiber_slot(typingctx: TypingContext, slot: types.Type) -> _Typed:
    """Slot ``slot`` of the running fiber's state, as the runner set it (the thread body's indices)."""
    if not isinstance(slot, types.IntegerLiteral):
        return None
    index = slot.literal_value

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        return builder.load(_global_slot(builder, index))

    return types.int64(slot), codegen
