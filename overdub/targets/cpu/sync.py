"""What the CUDA constructs that make threads wait for each other mean on the CPU target.

A kernel that uses a barrier (``cuda.syncthreads`` and its count/and/or forms), shared memory, a warp
operation (``shfl_*_sync``, ``all/any/eq/ballot_sync``, ``syncwarp``, ``activemask``) or a grid group
(``cuda.cg.this_grid().sync()``) runs each thread of a block as a fiber (``overdub/targets/cpu/_cpugrid.c``): these
constructs are calls into that runner, which switches to the next thread of the block when one has to wait.
Their code generation records what the kernel being built needs (:attr:`~.runner.Need.FIBERS`,
:attr:`~.runner.Need.GRID_SYNC`), and the target compiles the kernel's grid accordingly (:mod:`overdub.targets.cpu`).

Shared memory belongs to the block: each ``cuda.shared.array`` call site gets a number when it is compiled,
and the runner hands every thread of a block the same memory for it (static shared memory); the shape ``0``
means the launch's dynamic shared memory (``shmem=`` bytes), which all such arrays alias, as on the GPU.
"""

from __future__ import annotations

import itertools
import secrets
import sys
import types as pytypes
import typing
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeAlias

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.extending import intrinsic, models, overload_method, register_model

from ... import bridge
from .regions import in_grid_body
from .runner import LOCAL_MEMORY_LIMIT, LocalMemory, Need, native_call, need, require_runner

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"


SYNC_NAMES = (
    "syncthreads",
    "syncthreads_count",
    "syncthreads_and",
    "syncthreads_or",
    "shfl_sync",
    "shfl_up_sync",
    "shfl_down_sync",
    "shfl_xor_sync",
    "all_sync",
    "any_sync",
    "eq_sync",
    "ballot_sync",
    "syncwarp",
    "activemask",
)
"""The names of numba.cuda that make a kernel run its threads as fibers (besides shared memory and grid groups)."""

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_I8P = ir.IntType(8).as_pointer()


def _i32(value: int) -> ir.Constant:
    return ir.Constant(_I32, value)


def _i64(value: int) -> ir.Constant:
    return ir.Constant(_I64, value)


# --- block barriers --------------------------------------------------------------------------------------


def _barrier_need(builder: ir.IRBuilder) -> None:
    """A block barrier needs fibers -- or block regions, where it is the grid body's own (regions.py cuts it)."""
    if in_grid_body(builder):
        need(Need.FIBERS)
    else:
        need(Need.FIBERS, Need.FIBER_WAITS)


@intrinsic
def syncthreads(typingctx: TypingContext) -> _Typed:
    """``cuda.syncthreads()``: wait until every live thread of the block has arrived."""
    require_runner("cuda.syncthreads")

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        _barrier_need(builder)
        native_call(builder, "barrier", _I32, [_i32(0), _i32(0)])
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.none(), codegen


def _predicate_barrier(name: str, op: int) -> Any:  # a numba intrinsic
    def barrier(typingctx: TypingContext, predicate: types.Type) -> _Typed:
        require_runner(f"cuda.{name}")
        if not isinstance(predicate, types.Integer):  # numba-cuda's rule: a bool does not convert
            raise TypingError(
                f"cuda.{name} takes an integer predicate, not {predicate} (as on the GPU: write numba.int32(condition))"
            )

        def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
            _barrier_need(builder)
            value = context.cast(builder, args[0], sig.args[0], types.int32)  # type: ignore[no-untyped-call]  # numba's is unannotated
            return native_call(builder, "barrier", _I32, [_i32(op), value])

        return types.int32(predicate), codegen

    barrier.__name__ = barrier.__qualname__ = name
    return intrinsic(barrier)


syncthreads_count = _predicate_barrier("syncthreads_count", 1)
syncthreads_and = _predicate_barrier("syncthreads_and", 2)
syncthreads_or = _predicate_barrier("syncthreads_or", 3)


# --- warp operations (warps of 32 threads, numbered by the thread's linear index in its block) ------------

_SHUFFLED = (types.int32, types.int64, types.float32, types.float64)  # what numba-cuda shuffles


def _to_bits(builder: ir.IRBuilder, value: ir.Value, ty: types.Type) -> ir.Value:
    if ty == types.float32:
        return builder.zext(builder.bitcast(value, _I32), _I64)
    if ty == types.float64:
        return builder.bitcast(value, _I64)
    bitwidth: int = ty.bitwidth  # type: ignore[attr-defined]  # an Integer here: numba's stub omits bitwidth and signed
    if bitwidth == 64:
        return value
    return builder.sext(value, _I64) if ty.signed else builder.zext(value, _I64)  # type: ignore[attr-defined]  # an Integer here: numba's stub omits bitwidth and signed


def _from_bits(builder: ir.IRBuilder, bits: ir.Value, ty: types.Type) -> ir.Value:
    if ty == types.float32:
        return builder.bitcast(builder.trunc(bits, _I32), ir.FloatType())
    if ty == types.float64:
        return builder.bitcast(bits, ir.DoubleType())
    bitwidth: int = ty.bitwidth  # type: ignore[attr-defined]  # an Integer here: numba's stub omits bitwidth and signed
    return bits if bitwidth == 64 else builder.trunc(bits, ir.IntType(bitwidth))


def _warp_op(
    builder: ir.IRBuilder,
    context: BaseContext,
    op: int,
    value: ir.Value,
    arg: ir.Value,
    mask: ir.Value,
    mask_type: types.Type,
) -> ir.Value:
    mask = context.cast(builder, mask, mask_type, types.int64)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return native_call(builder, "warp", _I64, [_i32(op), value, arg, mask])


def _shuffle(name: str, op: int) -> Any:  # a numba intrinsic
    def shuffle(typingctx: TypingContext, mask: types.Type, value: types.Type, lane: types.Type) -> _Typed:
        require_runner(f"cuda.{name}")
        if value not in _SHUFFLED or not isinstance(mask, types.Integer) or not isinstance(lane, types.Integer):
            raise TypingError(
                f"cuda.{name}(mask, value, {'src_lane' if op == 0 else 'delta'}) takes an integer "
                f"mask and lane and a 32- or 64-bit int or float value, not ({mask}, {value}, {lane})"
            )

        def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
            need(Need.FIBERS, Need.FIBER_WAITS)
            lane_value = context.cast(builder, args[2], sig.args[2], types.int64)  # type: ignore[no-untyped-call]  # numba's is unannotated
            bits = _warp_op(builder, context, op, _to_bits(builder, args[1], value), lane_value, args[0], mask)
            return _from_bits(builder, bits, value)

        return value(mask, value, lane), codegen

    shuffle.__name__ = shuffle.__qualname__ = name
    return intrinsic(shuffle)


shfl_sync = _shuffle("shfl_sync", 0)
shfl_up_sync = _shuffle("shfl_up_sync", 1)
shfl_down_sync = _shuffle("shfl_down_sync", 2)
shfl_xor_sync = _shuffle("shfl_xor_sync", 3)


def _vote(name: str, op: int, restype: types.Type) -> Any:  # a numba intrinsic
    def vote(typingctx: TypingContext, mask: types.Type, predicate: types.Type) -> _Typed:
        require_runner(f"cuda.{name}")
        if not isinstance(mask, types.Integer) or not isinstance(predicate, (types.Integer, types.Boolean)):
            raise TypingError(
                f"cuda.{name}(mask, predicate) takes an integer mask and an integer or boolean "
                f"predicate, not ({mask}, {predicate})"
            )

        def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
            need(Need.FIBERS, Need.FIBER_WAITS)
            truth = context.cast(builder, args[1], sig.args[1], types.boolean)  # type: ignore[no-untyped-call]  # numba's is unannotated
            result = _warp_op(builder, context, op, builder.zext(truth, _I64), _i64(0), args[0], mask)
            if restype == types.boolean:
                return builder.icmp_unsigned("!=", result, _i64(0))
            return builder.trunc(result, _I32)

        return restype(mask, predicate), codegen

    vote.__name__ = vote.__qualname__ = name
    return intrinsic(vote)


all_sync = _vote("all_sync", 4, types.boolean)
any_sync = _vote("any_sync", 5, types.boolean)
eq_sync = _vote("eq_sync", 8, types.boolean)
ballot_sync = _vote("ballot_sync", 6, types.uint32)


@intrinsic
def syncwarp(typingctx: TypingContext, mask: types.Type | None = None) -> _Typed:
    """``cuda.syncwarp(mask=0xffffffff)``: wait for the live threads of the warp."""
    require_runner("cuda.syncwarp")
    if mask is not None and not isinstance(mask, (types.Integer, types.Omitted)):
        raise TypingError(f"cuda.syncwarp takes an integer mask, not {mask}")

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        need(Need.FIBERS, Need.FIBER_WAITS)
        native_call(builder, "warp", _I64, [_i32(7), _i64(0), _i64(0), _i64(0xFFFFFFFF)])
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.none(types.Omitted(None) if mask is None else mask), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def activemask(typingctx: TypingContext) -> _Typed:
    """``cuda.activemask()``: the lanes of the calling warp whose threads have not exited."""
    require_runner("cuda.activemask")

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        need(Need.FIBERS, Need.FIBER_WAITS)
        return builder.trunc(native_call(builder, "activemask", _I64, []), _I32)

    return types.uint32(), codegen


# --- grid groups -----------------------------------------------------------------------------------------


class GridGroupType(types.Type):
    """``cuda.cg.this_grid()`` on the CPU: its ``sync()`` waits for every thread of the grid."""

    def __init__(self) -> None:
        super().__init__(name="cpu.grid_group")


register_model(GridGroupType)(models.OpaqueModel)


@intrinsic
def this_grid(typingctx: TypingContext) -> _Typed:
    require_runner("cuda.cg.this_grid")

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        need(Need.FIBERS, Need.GRID_SYNC, Need.FIBER_WAITS)
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return GridGroupType()(), codegen


@intrinsic
def _grid_sync(typingctx: TypingContext, group: types.Type) -> _Typed:
    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        need(Need.FIBERS, Need.GRID_SYNC, Need.FIBER_WAITS)
        native_call(builder, "grid_sync", ir.VoidType(), [])
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.none(group), codegen


@overload_method(GridGroupType, "sync")
def _grid_group_sync(group):  # type: ignore[no-untyped-def]  # bare, as numba's @overload takes it (see half.py)
    return lambda group: _grid_sync(group)  # type: ignore[call-arg]  # numba's stub of an intrinsic's call counts the typing context


# --- shared and local arrays -----------------------------------------------------------------------------


def _literal_shape(shape: types.Type) -> tuple[int, ...] | None:
    items: tuple[types.Type, ...] = shape.types if isinstance(shape, types.BaseTuple) else (shape,)  # type: ignore[attr-defined]  # each BaseTuple has them
    values = tuple(getattr(t, "literal_value", None) for t in items)
    ints = values if values and all(isinstance(v, int) and v >= 0 for v in values) else None
    return typing.cast("tuple[int, ...] | None", ints)


def _element(dtype: types.Type) -> types.Type | None:
    element = getattr(dtype, "dtype", None)  # a numba type (NumberClass), np.float32, np.dtype(...)
    if isinstance(dtype, types.TypeRef):  # a numba type itself named as a global: a record's, say
        element = dtype.instance_type
    return element if isinstance(element, (types.Number, types.Boolean, types.Record)) else None


def _array_type(construct: str, shape: types.Type, dtype: types.Type) -> tuple[tuple[int, ...], types.Array]:
    dims, element = _literal_shape(shape), _element(dtype)
    if dims is None or element is None:
        raise TypingError(
            f"{construct}(shape, dtype) takes a constant shape (an int or a tuple of ints) and a "
            f"number or record dtype (numba.float32, np.float32, a numpy structured dtype), not ({shape}, {dtype})"
        )
    return dims, types.Array(element, len(dims), "C")


def _array_at(
    context: BaseContext, builder: ir.IRBuilder, array_type: types.Array, data: ir.Value, extents: list[ir.Value]
) -> ir.Value:
    """An array value over ``data`` with these (LLVM int64) extents, C-contiguous."""
    intp = context.get_value_type(types.intp)  # type: ignore[no-untyped-call]  # numba's is unannotated
    data_type = context.get_data_type(array_type.dtype)  # type: ignore[no-untyped-call]  # numba's is unannotated
    itemsize = context.get_abi_sizeof(data_type)  # type: ignore[no-untyped-call]  # numba's is unannotated
    strides, step, nitems = [], intp(itemsize), intp(1)
    for extent in reversed(extents):
        strides.append(step)
        step = builder.mul(step, extent)
        nitems = builder.mul(nitems, extent)
    # built as a value, not in a stack slot: every thread of a block computes it alike, and block regions
    # (regions.py) recompute such values after a barrier rather than keep them per thread
    model = context.data_model_manager[array_type]
    fields = {
        "meminfo": ir.Constant(_I8P, None),
        "parent": ir.Constant(_I8P, None),
        "nitems": nitems,
        "itemsize": intp(itemsize),
        "data": builder.bitcast(data, data_type.as_pointer()),
        "shape": _aggregate(builder, extents),
        "strides": _aggregate(builder, list(reversed(strides))),
    }
    value = ir.Constant(context.get_value_type(array_type), ir.Undefined)  # type: ignore[no-untyped-call]  # numba's is unannotated
    for name, field in fields.items():
        value = builder.insert_value(value, field, model.get_field_position(name))
    return value


def _aggregate(builder: ir.IRBuilder, values: Sequence[ir.Value]) -> ir.Value:
    aggregate = ir.Constant(ir.ArrayType(_I64, len(values)), ir.Undefined)
    for k, value in enumerate(values):
        aggregate = builder.insert_value(aggregate, value, k)
    return aggregate


def _itemsize(dtype: types.Type) -> int:
    if isinstance(dtype, types.Record):
        return int(dtype.size)
    return 1 if isinstance(dtype, types.Boolean) else dtype.bitwidth // 8  # type: ignore[attr-defined]  # a Number: numba's stub omits bitwidth


_unknown_sites = itertools.count()


def _lowering_site() -> str:
    """The source line numba is lowering on this thread ("file.py:12"), which names a local array's call site
    the same way however often its code is generated (a kernel compiled as a row loop, then as a thread body);
    a fresh name where none is found (counted twice then: a larger stack, never a smaller one). numba
    internals: the ``Lower`` on the stack holds the location of the instruction it lowers."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        lower: Any = frame.f_locals.get("self")
        if type(lower).__name__ == "Lower" and getattr(lower, "loc", None) is not None:
            loc = lower.loc
            if hasattr(loc, "filename"):
                return f"{loc.filename}:{loc.line}:{getattr(loc, 'col', None) or 0}"
        frame = frame.f_back
    return f"<unknown site {next(_unknown_sites)}>"


@intrinsic(prefer_literal=True)
def local_array(typingctx: TypingContext, shape: types.Type, dtype: types.Type) -> _Typed:
    """``cuda.local.array(shape, dtype)`` on the CPU: per-thread storage on the stack, like the GPU's local
    memory (kernels are compiled without numba's runtime, so nothing is heap-allocated)."""
    dims, array_type = _array_type("cuda.local.array", shape, dtype)
    count = 1
    for extent in dims:
        count *= extent
    nbytes = count * _itemsize(array_type.dtype)
    if nbytes > LOCAL_MEMORY_LIMIT:
        sites = bridge.call_sites()
        raise TypingError(
            f"cuda.local.array({dims}, {array_type.dtype}) takes {nbytes} bytes per thread"
            f"{' at ' + sites[0] if sites else ''}"
            f", more than CUDA's limit of {LOCAL_MEMORY_LIMIT} bytes (512 KiB) of local memory per thread"
        )

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        # the thread's stack must hold it: a fiber's stack is sized by the kernel's local arrays (runner.py)
        need(LocalMemory(_lowering_site(), nbytes))
        data = cgutils.alloca_once(builder, context.get_data_type(array_type.dtype), size=max(count, 1))  # type: ignore[no-untyped-call]  # numba's is unannotated
        return _array_at(context, builder, array_type, data, [_i64(d) for d in dims])

    return array_type(shape, dtype), codegen


# A shared array's call site is a number in the code, and the runner keeps a block's memory by that number
# between launches: numbered from a random start in each process, so that a kernel loaded from the disk cache
# (numbered by another process) does not meet this process's kernels' numbers (the runner also matches the
# size, see od_shared).
_shared_sites = itertools.count(secrets.randbits(40) << 20)


@intrinsic(prefer_literal=True)
def shared_array(typingctx: TypingContext, shape: types.Type, dtype: types.Type) -> _Typed:
    """``cuda.shared.array(shape, dtype)``: the block's memory for this call site; shape 0 is the launch's
    dynamic shared memory, as many elements as ``shmem`` bytes hold."""
    require_runner("cuda.shared.array")
    dims, array_type = _array_type("cuda.shared.array", shape, dtype)
    dynamic = dims == (0,)

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        need(Need.FIBERS)
        itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))  # type: ignore[no-untyped-call]  # numba's is unannotated
        if dynamic:
            data = native_call(builder, "dynamic_shared", _I8P, [])
            size = native_call(builder, "dynamic_shared_size", _I64, [])
            return _array_at(context, builder, array_type, data, [builder.udiv(size, _i64(itemsize))])
        count = 1
        for extent in dims:
            count *= extent
        data = native_call(builder, "shared", _I8P, [_i64(next(_shared_sites)), _i64(count * itemsize)])
        return _array_at(context, builder, array_type, data, [_i64(d) for d in dims])

    return array_type(shape, dtype), codegen


@intrinsic
def const_array_like(typingctx: TypingContext, ary: types.Type) -> _Typed:
    """``cuda.const.array_like(ary)``: the array itself (the CPU has no constant memory to copy it to)."""
    if not isinstance(ary, types.Array):
        raise TypingError(f"cuda.const.array_like takes an array, not {ary}")
    return ary(ary), lambda context, builder, sig, args: args[0]


def namespace(name: str, **members: object) -> pytypes.ModuleType:
    """A module of the kernel idiom, importable by its name (the disk cache finds the globals a kernel read
    through it by that name)."""
    module = pytypes.ModuleType(f"overdub.targets.cpu.{name}")
    vars(module).update(members)
    sys.modules[module.__name__] = module
    return module


CG = namespace("cg", this_grid=this_grid)
SHARED = namespace("shared", array=shared_array)
LOCAL = namespace("local", array=local_array)
CONST = namespace("const", array_like=const_array_like)
