"""``cuda.atomic.*`` on the CPU target: LLVM atomic instructions, so they stay atomic while blocks run in
parallel on several cores.

Each is one ``atomicrmw`` (or ``cmpxchg``) on the element's address, relaxed ("monotonic") like CUDA's
atomics, returning the old value. Integer max/min compare signed or unsigned as the array's dtype is;
``inc``/``dec`` wrap as CUDA's do (``old >= val ? 0 : old + 1``; ``old == 0 or old > val ? val : old - 1``),
which LLVM's ``uinc_wrap``/``udec_wrap`` are. Float ``max``/``min``/``nanmax``/``nanmin`` are numba-cuda's
compare-and-swap loops (its ``___numba_atomic_double_max`` and kin), whose NaN rules are none of LLVM's
``fmax``/``fmin``: ``max``/``min`` store nothing where the value or the element is NaN (a NaN element stays),
``nanmax``/``nanmin`` store nothing where the value is NaN and replace a NaN element; all return the element
as first loaded.

Where the grid runs on one worker thread, no two threads touch memory at the same time (fibers switch only
at barriers), and a locked instruction per atomic costs 20-100x a plain read-modify-write. So a grid body
says in a flag whether its grid runs on several workers (:func:`set_parallel`), and each atomic inlined in
it branches on that flag to a plain read-modify-write (LLVM unswitches the loops around it); an atomic in a
callee compiled on its own, which sees no flag, is always the locked instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.extending import intrinsic

from .sync import namespace

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"


_ORDER = "monotonic"
_PARALLEL = "overdub.parallel"


@intrinsic
def set_parallel(typingctx: TypingContext, flag: types.Type) -> _Typed:
    """In a grid body: whether its grid runs on more than one worker thread."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        slot = cgutils.alloca_once(builder, ir.IntType(1), name=_PARALLEL)  # type: ignore[no-untyped-call]  # numba's is unannotated
        builder.store(context.cast(builder, args[0], sig.args[0], types.boolean), slot)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.none(flag), codegen


def _parallel_flag(builder: ir.IRBuilder) -> ir.Value | None:
    for instruction in builder.function.entry_basic_block.instructions:
        if instruction.name == _PARALLEL:
            return builder.load(instruction)
    return None


def _serial_rmw(builder: ir.IRBuilder, op: str, pointer: ir.Value, value: ir.Value) -> ir.Value:
    """The read-modify-write of ``op`` as plain instructions (one worker: nothing runs concurrently)."""
    old = builder.load(pointer)
    if op in ("add", "sub", "and", "or", "xor", "fadd", "fsub"):
        new = getattr(builder, {"and": "and_", "or": "or_"}.get(op, op))(old, value)
    elif op == "xchg":
        new = value
    elif op in ("max", "min", "umax", "umin"):
        compare = builder.icmp_unsigned if op.startswith("u") else builder.icmp_signed
        new = builder.select(compare(">" if op.endswith("max") else "<", old, value), old, value)
    elif op == "uinc_wrap":  # old >= val ? 0 : old + 1
        new = builder.select(
            builder.icmp_unsigned(">=", old, value),
            ir.Constant(old.type, 0),
            builder.add(old, ir.Constant(old.type, 1)),
        )
    else:  # udec_wrap: old == 0 or old > val ? val : old - 1
        wrap = builder.or_(
            builder.icmp_unsigned("==", old, ir.Constant(old.type, 0)), builder.icmp_unsigned(">", old, value)
        )
        new = builder.select(wrap, value, builder.sub(old, ir.Constant(old.type, 1)))
    builder.store(new, pointer)
    return old


def _rmw_instruction(builder: ir.IRBuilder, op: str, pointer: ir.Value, value: ir.Value) -> ir.Value:
    """The atomic read-modify-write, or, in a grid body running on one worker, the plain one."""
    parallel = _parallel_flag(builder)
    if parallel is None:
        return builder.atomic_rmw(op, pointer, value, _ORDER)
    with builder.if_else(parallel) as (atomic, serial):
        with atomic:
            atomic_old = builder.atomic_rmw(op, pointer, value, _ORDER)
            atomic_block = builder.block
        with serial:
            serial_old = _serial_rmw(builder, op, pointer, value)
            serial_block = builder.block
    old = builder.phi(value.type)
    old.add_incoming(atomic_old, atomic_block)
    old.add_incoming(serial_old, serial_block)
    return old


# name: (signed int op, unsigned int op, float op); None where the dtype is not supported; a float op of
# _FLOAT_EXTREMES is a compare-and-swap loop
_OPERATIONS: dict[str, tuple[str | None, str | None, str | None]] = {
    "add": ("add", "add", "fadd"),
    "sub": ("sub", "sub", "fsub"),
    "max": ("max", "umax", "fmax"),
    "min": ("min", "umin", "fmin"),
    "nanmax": ("max", "umax", "fnanmax"),
    "nanmin": ("min", "umin", "fnanmin"),
    "exch": ("xchg", "xchg", "xchg"),
    "and_": ("and", "and", None),
    "or_": ("or", "or", None),
    "xor": ("xor", "xor", None),
    "inc": (None, "uinc_wrap", None),
    "dec": (None, "udec_wrap", None),
}


def _index_types(ary: types.Array, idx: types.Type) -> tuple[types.Type, ...] | None:
    items: tuple[types.Type, ...] = idx.types if isinstance(idx, types.BaseTuple) else (idx,)  # type: ignore[attr-defined]  # each BaseTuple has them
    # numba-cuda casts each index to intp, a float one too (a tuple of an int and a uint64 may unify to floats)
    if len(items) != ary.ndim or not all(isinstance(t, (types.Integer, types.Float, types.Boolean)) for t in items):
        return None
    return items


def _element_pointer(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
    aryty, idxty = sig.args[0], sig.args[1]
    ary = context.make_array(aryty)(context, builder, args[0])  # type: ignore[no-untyped-call]  # numba's is unannotated
    if isinstance(idxty, types.BaseTuple):
        items = cgutils.unpack_tuple(builder, args[1], len(idxty))  # type: ignore[no-untyped-call]  # numba's is unannotated
        item_types = idxty.types  # type: ignore[attr-defined]  # each BaseTuple has them
    else:
        items, item_types = [args[1]], [idxty]
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(items, item_types)]  # type: ignore[no-untyped-call]  # numba's is unannotated
    return cgutils.get_item_pointer(context, builder, aryty, ary, indices, wraparound=True)  # type: ignore[no-untyped-call]  # numba's is unannotated


def _check(name: str, ary: types.Type, idx: types.Type, supported: bool) -> None:
    if not isinstance(ary, types.Array) or _index_types(ary, idx) is None:
        raise TypingError(
            f"cuda.atomic.{name}(ary, idx, val) takes an array and a numeric index (a tuple of "
            f"{getattr(ary, 'ndim', 'N')} for an array of that rank), not ({ary}, {idx})"
        )
    if not supported:
        raise TypingError(f"cuda.atomic.{name} does not support arrays of {ary.dtype}")


# numba-cuda's float max/min (cudadrv/nvvm.py): (the comparison of element and value that stores the value,
# whether a NaN element is kept as it is)
_FLOAT_EXTREMES = {"fmax": ("olt", True), "fmin": ("ogt", True), "fnanmax": ("ult", False), "fnanmin": ("ugt", False)}


def _float_extreme(builder: ir.IRBuilder, op: str, pointer: ir.Value, value: ir.Value) -> ir.Value:
    """numba-cuda's float ``max``/``min``/``nanmax``/``nanmin`` of the element at ``pointer`` and ``value``: a
    compare-and-swap loop (or, in a grid body running on one worker, a plain load and store); the element as
    first loaded."""
    compare, nan_element_stays = _FLOAT_EXTREMES[op]
    first = builder.load_atomic(pointer, _ORDER, _float_bits(value.type) // 8)
    skip = builder.fcmp_unordered("uno", value, first if nan_element_stays else value)
    parallel = _parallel_flag(builder)
    with builder.if_then(builder.not_(skip)):
        if parallel is None:
            _compare_and_swap_loop(builder, compare, pointer, first, value)
        else:
            with builder.if_else(parallel) as (atomic, serial):
                with atomic:
                    _compare_and_swap_loop(builder, compare, pointer, first, value)
                with serial, builder.if_then(_fcmp(builder, compare, first, value)):
                    builder.store(value, pointer)
    return first


def _compare_and_swap_loop(
    builder: ir.IRBuilder, compare: str, pointer: ir.Value, first: ir.Value, value: ir.Value
) -> None:
    """Swap ``value`` in while the element compares as ``compare`` with it (another thread may have stored
    since it was read)."""
    bits = ir.IntType(_float_bits(value.type))
    int_pointer = builder.bitcast(pointer, bits.as_pointer())
    entry = builder.block
    check = builder.append_basic_block("atomic_extreme.check")
    attempt = builder.append_basic_block("atomic_extreme.attempt")
    done = builder.append_basic_block("atomic_extreme.done")
    builder.branch(check)
    builder.position_at_end(check)
    current = builder.phi(value.type)
    current.add_incoming(first, entry)
    builder.cbranch(_fcmp(builder, compare, current, value), attempt, done)
    builder.position_at_end(attempt)
    swapped = builder.cmpxchg(int_pointer, builder.bitcast(current, bits), builder.bitcast(value, bits), _ORDER, _ORDER)
    current.add_incoming(builder.bitcast(builder.extract_value(swapped, 0), value.type), attempt)
    builder.cbranch(builder.extract_value(swapped, 1), done, check)
    builder.position_at_end(done)


def _float_bits(llty: ir.Type) -> int:
    return 32 if isinstance(llty, ir.FloatType) else 64


def _fcmp(builder: ir.IRBuilder, compare: str, a: ir.Value, b: ir.Value) -> ir.Value:
    ordered = compare.startswith("o")
    operator = {"lt": "<", "gt": ">"}[compare[1:]]
    return builder.fcmp_ordered(operator, a, b) if ordered else builder.fcmp_unordered(operator, a, b)


def _rmw(name: str, ops: tuple[str | None, str | None, str | None]) -> Any:  # a numba intrinsic
    def atomic(typingctx: TypingContext, ary: types.Type, idx: types.Type, val: types.Type) -> _Typed:
        dtype: Any = getattr(ary, "dtype", None)
        op = None
        if isinstance(dtype, types.Float):
            op = ops[2]
        elif isinstance(dtype, types.Integer):
            op = ops[0] if dtype.signed else ops[1]  # type: ignore[attr-defined]  # numba's stub of Integer omits it
        _check(name, ary, idx, op is not None)
        assert op is not None  # _check refused the dtypes without one

        def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
            pointer = _element_pointer(context, builder, sig, args)
            value = context.cast(builder, args[2], sig.args[2], dtype)  # type: ignore[no-untyped-call]  # numba's is unannotated
            if op in _FLOAT_EXTREMES:
                return _float_extreme(builder, op, pointer, value)
            return _rmw_instruction(builder, op, pointer, value)

        return dtype(ary, idx, val), codegen

    atomic.__name__ = name
    atomic.__qualname__ = f"ATOMIC.{name}"  # how another process finds it (the disk cache)
    return intrinsic(atomic)


def _cas(
    builder: ir.IRBuilder,
    context: BaseContext,
    pointer: ir.Value,
    dtype: types.Type,
    expected: ir.Value,
    value: ir.Value,
) -> ir.Value:
    if isinstance(dtype, types.Float):  # cmpxchg compares bits: on the integer of the same width
        bits = ir.IntType(dtype.bitwidth)
        pointer = builder.bitcast(pointer, bits.as_pointer())
        expected, value = builder.bitcast(expected, bits), builder.bitcast(value, bits)
    previous = builder.extract_value(builder.cmpxchg(pointer, expected, value, _ORDER, _ORDER), 0)
    return builder.bitcast(previous, context.get_value_type(dtype))  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def cas(typingctx: TypingContext, ary: types.Type, idx: types.Type, old: types.Type, val: types.Type) -> _Typed:
    """``cuda.atomic.cas(ary, idx, old, val)``: store ``val`` where the element equals ``old``; return what
    the element was."""
    dtype: Any = getattr(ary, "dtype", None)
    _check("cas", ary, idx, isinstance(dtype, (types.Integer, types.Float)))

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        pointer = _element_pointer(context, builder, sig, args)
        return _cas(
            builder,
            context,
            pointer,
            dtype,
            context.cast(builder, args[2], sig.args[2], dtype),  # type: ignore[no-untyped-call]  # numba's is unannotated
            context.cast(builder, args[3], sig.args[3], dtype),  # type: ignore[no-untyped-call]  # numba's is unannotated
        )

    return dtype(ary, idx, old, val), codegen


@intrinsic
def compare_and_swap(typingctx: TypingContext, ary: types.Type, old: types.Type, val: types.Type) -> _Typed:
    """``cuda.atomic.compare_and_swap(ary, old, val)``: ``cas`` on the first element of a 1-d array."""
    dtype: Any = getattr(ary, "dtype", None)
    _check("compare_and_swap", ary, types.intp, isinstance(dtype, (types.Integer, types.Float)))

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        array = context.make_array(sig.args[0])(context, builder, args[0])  # type: ignore[no-untyped-call]  # numba's is unannotated
        return _cas(
            builder,
            context,
            array.data,
            dtype,
            context.cast(builder, args[1], sig.args[1], dtype),  # type: ignore[no-untyped-call]  # numba's is unannotated
            context.cast(builder, args[2], sig.args[2], dtype),  # type: ignore[no-untyped-call]  # numba's is unannotated
        )

    return dtype(ary, old, val), codegen


ATOMIC = namespace(
    "atomic", cas=cas, compare_and_swap=compare_and_swap, **{name: _rmw(name, ops) for name, ops in _OPERATIONS.items()}
)
"""``numba.cuda.atomic`` inside a CPU-target kernel."""
