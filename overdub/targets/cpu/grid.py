"""Grid bodies on the CPU target: the compiled functions the native runner (``overdub/targets/cpu/_cpugrid.c``) calls.

A launch calls an *entry* function (compiled without the GIL, one per tuple of argument types): it packs
(grid, block, kernel arguments) into one tuple on its stack and hands its address to the runner, with the
address of the kernel's *grid body*; each worker calls the body with that address. A body is either the row
loop (the kernel inlined into a loop over a row of threads the runner hands out, by global x index) or a
thread body (the kernel inlined once, run by each fiber). Bodies are called through numba's calling convention (status code,
exception info; see _cpugrid.c), so an exception raised by a kernel reaches the launch and is re-raised
there -- numba internals (the call convention's status), admitted here and in ``run_grid``.
"""

from __future__ import annotations

import re
import types as pytypes
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from ...rewrite import STATE_PARAMETER
from ...runtime import runtime
from . import regions
from .atomics import set_parallel
from .guard import x_bounds
from .runner import Need, native_call
from .state import fiber_slot, set_row, set_slot, set_x
from .stores import GRID_BODY
from .sync import SYNC_NAMES

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.compiler import CompileResult
    from numba.core.dispatcher import Dispatcher
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

# what an intrinsic's typing answers: the call's signature and its code generator, or None (no such call)
_Typed: TypeAlias = "tuple[Signature, Callable[..., ir.Value]] | None"
_Compiled: TypeAlias = "Dispatcher[Any]"  # a grid body, loop or entry: a numba dispatcher
_Options: TypeAlias = "dict[str, Any]"  # numba's compile options


MODES = {"grid loop": 0, "block fibers": 1, "grid fibers": 2, "block rows": 3, "block regions": 4}
RAISE_ENDS_THREAD = 8
"""Added to the mode of a launch that is not checked (debug): a thread raising an exception ends, as on CUDA
without debug, instead of stopping the grid (_cpugrid.c)."""


def packed(argtypes: Sequence[types.Type]) -> types.Tuple:
    """The launch tuple: grid and block extents, whether more than one worker runs the grid, the arguments."""
    return types.Tuple((types.int64,) * 6 + (types.boolean,) + tuple(argtypes))  # type: ignore[no-untyped-call]  # numba's is unannotated


_loaders: dict[
    types.Tuple, Any
] = {}  # launch tuple type -> its loader: numba's typing keeps every intrinsic's template
runtime.register_cache(f"{__name__}._loaders", _loaders, kept="numba's typing keeps every intrinsic's template")


def _args_loader(packed: types.Tuple) -> Any:  # a numba intrinsic
    """An intrinsic ``load(address)``: the packed launch tuple at ``address`` (one per tuple type, kept for the
    process as the entries are: a new one per compile would add a typing template per compile)."""
    loader = _loaders.get(packed)
    if loader is None:

        @intrinsic
        def load_args(typingctx: TypingContext, address: types.Type) -> _Typed:
            def codegen(
                context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]
            ) -> ir.Value:
                pointer = builder.bitcast(args[0], context.get_value_type(packed).as_pointer())  # type: ignore[no-untyped-call]  # numba's is unannotated
                return builder.load(pointer)

            return packed(address), codegen

        loader = _loaders.setdefault(packed, load_args)
    return loader


def _bound_value(context: BaseContext, builder: ir.IRBuilder, ty: types.Type, value: ir.Value) -> ir.Value | None:
    """A bound compared with a thread's x index (an int64) as numba compares them -- widened to an int64 --
    or None where that is not exact: not an integer, or a uint64 (numba compares those as floats)."""
    if not isinstance(ty, types.Integer) or (not ty.signed and ty.bitwidth >= 64):  # type: ignore[attr-defined]  # numba's stub of Integer omits them
        return None
    return context.cast(builder, value, ty, types.int64)  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def narrow(typingctx: TypingContext, op: types.Type, bound: types.Type, lo: types.Type, hi: types.Type) -> _Typed:
    """``(lo, hi)``, the range of x indices a row loop runs, narrowed to those with ``x op bound``; unchanged
    where the bound is no exact integer (the kernel's own comparison then decides, thread by thread)."""
    if not isinstance(op, types.StringLiteral):
        return None
    relation = op.literal_value

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        low, high = args[2], args[3]
        value = _bound_value(context, builder, sig.args[1], args[1])
        if value is not None:
            top = ir.Constant(value.type, 2**63 - 1)
            at_top = builder.icmp_signed("==", value, top)
            successor = builder.add(value, ir.Constant(value.type, 1))  # not taken at the top

            def smin(a: ir.Value, b: ir.Value) -> ir.Value:
                return builder.select(builder.icmp_signed("<", a, b), a, b)

            def smax(a: ir.Value, b: ir.Value) -> ir.Value:
                return builder.select(builder.icmp_signed(">", a, b), a, b)

            if relation == "<":
                high = smin(high, value)
            elif relation == "<=":  # x <= top holds for every x
                high = builder.select(at_top, high, smin(high, successor))
            elif relation == ">":  # x > top holds for none
                low = builder.select(at_top, high, smax(low, successor))
            else:
                low = smax(low, value)
        return context.make_tuple(builder, sig.return_type, (low, high))  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.UniTuple(types.int64, 2)(op, bound, types.int64, types.int64), codegen  # type: ignore[no-untyped-call]  # numba's is unannotated


@intrinsic
def assume_x(typingctx: TypingContext, op: types.Type, x: types.Type, bound: types.Type) -> _Typed:
    """Tell LLVM that ``x op bound`` holds -- in the row loop, for the x indices ``narrow`` kept -- as the
    very comparison the kernel makes, so that LLVM folds the kernel's guard away."""
    if not isinstance(op, types.StringLiteral):
        return None
    relation = op.literal_value

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        value = _bound_value(context, builder, sig.args[2], args[2])
        if value is not None:
            builder.assume(builder.icmp_signed(relation, args[1], value))
        return context.get_dummy_value()  # type: ignore[no-untyped-call]  # numba's is unannotated

    return types.void(op, types.int64, bound), codegen


# The loops of a grid body, after a header that binds the launch tuple's fields: the row loop (one row of threads
# of a run of blocks, which the runner hands out: every thread sharing a y and z index with the blocks', one
# after another by global x index -- one loop as long as the data, which LLVM vectorises as it would njit's);
# the serial grid loop (every row of a chunk of blocks, where the runner is not built); the thread body (one
# thread, its indices from its fiber's state). Each loop over x runs only the threads the kernel's bounds guard
# admits (cpu_guard), where it says the guard holds.
_GRID_SLOTS = """
    set_parallel(parallel)
    set_slot(6, bx); set_slot(7, by); set_slot(8, bz)
    set_slot(9, gx); set_slot(10, gy); set_slot(11, gz)
"""

ROW_LOOP = (
    _GRID_SLOTS
    + """
    set_row(row, by, bz, gy)
    lo = first
    hi = end
    {narrow}
    for x in range(lo, hi):
        set_x(x, first, bx)
        {assume}
        kernel({args})
"""
)

SERIAL_LOOP = (
    _GRID_SLOTS
    + """
    rows = by * bz
    for b in range(first, end):
        g = b // gx
        start = (b % gx) * bx
        for r in range(rows):
            set_row(g * rows + r, by, bz, gy)
            lo = start
            hi = start + bx
            {narrow}
            for x in range(lo, hi):
                set_x(x, start, bx)
                {assume}
                kernel({args})
"""
)

THREAD_BODY = """
    set_parallel(parallel)
{slots}
    kernel({args})
"""

_FROM_ADDRESS = """
def body(address, first, end, row):
    gx, gy, gz, bx, by, bz, parallel{params} = load_args(address)
"""

# A kernel taking a launch's state as its hidden first parameter gets its callees' state from the first argument
# of the function it is inlined into (bridge.hidden.hidden_argument): there the loops are a function of the arguments
# first, which the body the runner calls passes on.
_ARGUMENTS_FIRST = """
def grid({args_first}gx, gy, gz, bx, by, bz, parallel, first, end, row):
"""

_TRAMPOLINE = """
def body(address, first, end, row):
    gx, gy, gz, bx, by, bz, parallel{params} = load_args(address)
    grid({args_first}gx, gy, gz, bx, by, bz, parallel, first, end, row)
"""


def _source(header: str, loops: str, nargs: int, bounds: Sequence[tuple[str, str]] = ()) -> str:
    args = ", ".join(f"a{i}" for i in range(nargs))
    slots = "\n".join(f"    set_slot({k}, fiber_slot({k}))" for k in range(12))
    source = (header + loops.lstrip("\n")).format(
        params="".join(f", a{i}" for i in range(nargs)),
        args=args,
        args_first="".join(f"a{i}, " for i in range(nargs)),
        slots=slots,
        narrow="{narrow}",
        assume="{assume}",
    )
    source = _lines(source, "{narrow}", [f"lo, hi = narrow({op!r}, {bound}, lo, hi)" for op, bound in bounds])
    return _lines(source, "{assume}", [f"assume_x({op!r}, x, {bound})" for op, bound in bounds])


def _lines(source: str, placeholder: str, lines: list[str]) -> str:
    """``source`` with the line holding ``placeholder`` replaced by ``lines``, at its indentation."""
    return re.sub(
        rf"^( *){re.escape(placeholder)}\n",
        lambda found: "".join(f"{found.group(1)}{line}\n" for line in lines),
        source,
        flags=re.M,
    )


def _takes_state(func: pytypes.FunctionType) -> bool:
    code = func.__code__
    return code.co_argcount > 0 and code.co_varnames[0] == STATE_PARAMETER


BODY_TYPES = (types.voidptr, types.int64, types.int64, types.int64)


def _stub(header: str, nargs: int) -> Callable[..., None]:
    """A def with the parameters of a grid body (or of the serial grid loop), for a dispatcher holding only
    code loaded from the disk cache."""
    namespace_: dict[str, Any] = {"load_args": None}
    exec(compile(_source(header, "    pass\n", nargs), GRID_BODY, "exec"), namespace_)
    stub: Callable[..., None] = namespace_["grid" if header is _ARGUMENTS_FIRST else "body"]
    return stub


def _loops_function(
    func: pytypes.FunctionType,
    argtypes: tuple[types.Type, ...],
    header: str,
    loops: str,
    options: _Options,
    cut: bool = False,
    **njit: bool,
) -> _Compiled:
    """The loops with ``func`` inlined, under ``header``, as a numba dispatcher (not compiled yet), named for
    :mod:`.regions`: a grid body of its own (a barrier there is the kernel's), to be cut at its barriers or not."""
    kernel = numba.njit(func, inline="always", **options)
    # a checked kernel runs every thread: one the guard rejects may still index out of range before it
    bounds = x_bounds(func, argtypes) if loops is not THREAD_BODY and not options["boundscheck"] else ()
    namespace_: dict[str, Any] = {
        "kernel": kernel,
        "set_slot": set_slot,
        "set_x": set_x,
        "set_row": set_row,
        "fiber_slot": fiber_slot,
        "set_parallel": set_parallel,
        "narrow": narrow,
        "assume_x": assume_x,
        "load_args": _args_loader(packed(argtypes)),
    }
    exec(compile(_source(header, loops, len(argtypes), bounds), GRID_BODY, "exec"), namespace_)
    function = namespace_["grid" if header is _ARGUMENTS_FIRST else "body"]
    function.__qualname__ = regions.CUT_NAME if cut else regions.GRID_NAME
    loops_function: _Compiled = numba.njit(function, **options, **njit)  # type: ignore[call-overload]  # numba's stub of njit omits its target options
    return loops_function


def compile_body(
    func: pytypes.FunctionType, argtypes: tuple[types.Type, ...], loops: str, options: _Options, cut: bool = False
) -> tuple[_Compiled, int, bool]:
    """The grid body of ``func`` (its loops: ROW_LOOP or THREAD_BODY), compiled with numba's ``options``, its
    address, and whether it was cut at its barriers (asked by ``cut``, for a THREAD_BODY: :mod:`.regions`).
    The body is called from C only: it has no CPython wrapper."""
    regions.cutting()
    if _takes_state(func):
        grid = _loops_function(func, argtypes, _ARGUMENTS_FIRST, loops, options, cut)
        namespace_: dict[str, Any] = {"grid": grid, "load_args": _args_loader(packed(argtypes))}
        exec(compile(_source(_TRAMPOLINE, "", len(argtypes)), GRID_BODY, "exec"), namespace_)
        body = numba.njit(namespace_["body"], no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)  # type: ignore[call-overload]  # numba's stub of njit omits its target options
    else:
        body = _loops_function(
            func, argtypes, _FROM_ADDRESS, loops, options, cut, no_cpython_wrapper=True, no_cfunc_wrapper=True
        )
    body.compile(BODY_TYPES)
    body.disable_compile()
    return body, body_address(body), cut and regions.cut_size() is not None


def body_address(body: _Compiled) -> int:
    """The address of a grid body's compiled function, which the runner calls (numba internals: the
    compiled function's native symbol, in the JIT of this process)."""
    compiled: Any = body.overloads[BODY_TYPES]  # a CompileResult: numba's stub omits library and fndesc
    address: int = compiled.library.get_pointer_to_function(compiled.fndesc.llvm_func_name)
    return address


def loaded_body(cres: CompileResult, options: _Options) -> tuple[_Compiled, int]:
    """A grid body of code loaded from the disk cache (``cres``, numba's rebuilt compile result), as a
    dispatcher that owns it, and its address."""
    body = numba.njit(_stub(_FROM_ADDRESS, 0), no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)  # type: ignore[call-overload]  # numba's stub of njit omits its target options
    body.add_overload(cres)
    body.disable_compile()
    return body, body_address(body)


def loaded_serial(cres: CompileResult, nargs: int, options: _Options) -> _Compiled:
    """The serial grid loop of code loaded from the disk cache, as a dispatcher that owns it."""
    grid_loop: _Compiled = numba.njit(_stub(_ARGUMENTS_FIRST, nargs), no_cfunc_wrapper=True, **options)  # type: ignore[call-overload]  # numba's stub of njit omits its target options
    grid_loop.add_overload(cres)
    grid_loop.disable_compile()
    return grid_loop


@intrinsic
def run_grid(
    typingctx: TypingContext,
    mode: types.Type,
    workers: types.Type,
    body: types.Type,
    gx: types.Type,
    gy: types.Type,
    gz: types.Type,
    bx: types.Type,
    by: types.Type,
    bz: types.Type,
    shmem: types.Type,
    stack: types.Type,
    packed: types.Type,
) -> _Typed:
    """Run the grid on the runner; re-raise the first exception a kernel thread raised, as this function's
    own (numba internals: the call convention's status and its propagation)."""

    def codegen(context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[ir.Value]) -> ir.Value:
        from numba.core.callconv import excinfo_ptr_t

        slot = cgutils.alloca_once(builder, context.get_value_type(sig.args[-1]))  # type: ignore[no-untyped-call]  # numba's is unannotated
        builder.store(args[-1], slot)
        code = cgutils.alloca_once(builder, ir.IntType(32))  # type: ignore[no-untyped-call]  # numba's is unannotated
        excinfo = cgutils.alloca_once(builder, excinfo_ptr_t)  # type: ignore[no-untyped-call]  # numba's is unannotated
        i8p = ir.IntType(8).as_pointer()
        result = native_call(
            builder,
            "run",
            ir.IntType(32),
            [
                args[0],
                args[1],
                builder.inttoptr(args[2], i8p),
                builder.bitcast(slot, i8p),
                *args[3:11],
                code,
                builder.bitcast(excinfo, i8p.as_pointer()),
            ],
        )
        with builder.if_then(builder.icmp_signed("==", result, ir.Constant(ir.IntType(32), 1)), likely=False):
            status = context.call_conv._get_return_status(builder, builder.load(code), builder.load(excinfo))  # type: ignore[attr-defined]  # each target's context has one
            context.call_conv.return_status_propagate(builder, status)  # type: ignore[attr-defined]  # each target's context has one
        return result

    return types.int32(mode, workers, body, gx, gy, gz, bx, by, bz, shmem, stack, packed), codegen


_ENTRY = """
def entry(mode, workers, body, gx, gy, gz, bx, by, bz, shmem, stack{params}):
    parallel = workers > 1 and gx * gy * gz > 1
    packed = (gx, gy, gz, bx, by, bz, parallel{params})
    return run_grid(mode, workers, body, gx, gy, gz, bx, by, bz, shmem, stack, packed)
"""
_entries: dict[
    tuple[types.Type, ...], _Compiled
] = {}  # argument types -> entry: code of numba types only, kept for the process
runtime.register_cache(f"{__name__}._entries", _entries, kept="code of numba types only, no overdub state")


def entry_types(argtypes: Sequence[types.Type]) -> tuple[types.Type, ...]:
    """The entry's parameters: mode, workers, body address, grid, block, shmem, a fiber's stack size, then the
    kernel's."""
    return (types.int64,) * 11 + tuple(argtypes)


def serial_types(argtypes: Sequence[types.Type]) -> tuple[types.Type, ...]:
    """The serial grid loop's parameters: the kernel's arguments, then the grid, the block, whether parallel
    (False), the first block, the end and a row number (unused)."""
    return tuple(argtypes) + (types.int64,) * 6 + (types.boolean, types.int64, types.int64, types.int64)


def entry(argtypes: tuple[types.Type, ...]) -> _Compiled:
    """The compiled function a launch calls (without the GIL): packs the arguments and runs the grid. One per
    tuple of argument types, shared by every kernel taking them."""
    compiled = _entries.get(argtypes)
    if compiled is None:
        namespace_: dict[str, Any] = {"run_grid": run_grid}
        params = "".join(f", a{i}" for i in range(len(argtypes)))
        exec(compile(_ENTRY.format(params=params), "<overdub grid entry>", "exec"), namespace_)
        compiled = numba.njit(namespace_["entry"], _nrt=False, nogil=True, no_cfunc_wrapper=True)  # type: ignore[call-overload]  # numba's stub of njit omits its target options
        compiled.compile(entry_types(argtypes))
        compiled.disable_compile()
        _entries[argtypes] = compiled
    return compiled


def loaded_entry(argtypes: tuple[types.Type, ...], rebuild: Callable[[], CompileResult]) -> _Compiled:
    """The entry of ``argtypes``: this process's (compiled or loaded before), else ``rebuild()``'s compile
    result, code loaded from the disk cache."""
    compiled = _entries.get(argtypes)
    if compiled is None:
        namespace_: dict[str, Any] = {"run_grid": None}
        params = "".join(f", a{i}" for i in range(len(argtypes)))
        exec(compile(_ENTRY.format(params=params), "<overdub grid entry>", "exec"), namespace_)
        compiled = numba.njit(namespace_["entry"], _nrt=False, nogil=True)  # type: ignore[call-overload]  # a stub holding the code (numba's stub of njit omits _nrt)
        compiled.add_overload(rebuild())
        compiled.disable_compile()
        compiled = _entries.setdefault(argtypes, compiled)
    return compiled


def uses_sync(func: pytypes.FunctionType) -> bool:
    """Does the kernel itself name a construct that needs fibers? (A first guess, read off its code; its
    callees are known only once compiled.)"""
    code = func.__code__
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names.update(const.co_names)
    return not names.isdisjoint(SYNC_NAMES + ("shared", "this_grid"))


def compile_grid_body(
    func: Callable[..., Any], argtypes: tuple[types.Type, ...], needs: set[object], options: _Options
) -> tuple[_Compiled, int, str]:
    """The grid body ``func`` needs, its address and the runner's mode for it. ``needs`` is what the kernel
    being built needs, filled in while its code (and its callees') is generated: a kernel first compiled as a
    grid loop is compiled again as a thread body when it turned out to need one; a thread body is cut at its
    barriers (block regions) unless the kernel waits where it cannot be cut (then its threads are fibers)."""
    assert isinstance(func, pytypes.FunctionType)  # a kernel rewritten in its chain

    def cuttable() -> bool:
        return Need.FIBER_WAITS not in needs and Need.GRID_SYNC not in needs

    template = THREAD_BODY if uses_sync(func) else ROW_LOOP
    body, address, cut = compile_body(func, argtypes, template, options, cut=template is THREAD_BODY)
    # a raise ends its thread alone (not debug): a row loop may raise, so each thread runs on its own instead
    raising = template is ROW_LOOP and not options["boundscheck"] and may_raise(body)
    if template is ROW_LOOP and (Need.FIBERS in needs or raising):
        body, address, cut = compile_body(func, argtypes, THREAD_BODY, options, cut=cuttable())
    elif cut and not cuttable():  # a callee waits: fibers after all
        body, address, cut = compile_body(func, argtypes, THREAD_BODY, options)
    mode = (
        "grid fibers"
        if Need.GRID_SYNC in needs
        else "block regions"
        if cut
        else "block fibers"
        if Need.FIBERS in needs or raising
        else "block rows"
        if Need.BLOCK_ROWS in needs
        else "grid loop"
    )
    return body, address, mode


def may_raise(body: _Compiled) -> bool:
    """Can the compiled grid body return an exception (a ``raise`` of the kernel or of a callee)? Read off its
    optimised code: a function that cannot raise returns only numba's OK and None statuses (0, -2), as
    constants (numba internals: the CPU calling convention's status codes)."""
    compiled: Any = body.overloads[BODY_TYPES]  # a CompileResult: numba's stub omits library and fndesc
    code = str(compiled.library.get_function(compiled.fndesc.llvm_func_name))
    return any(status not in ("0", "-2") for status in re.findall(r"\bret i32 (\S+)", code))


def compile_serial(func: Callable[..., Any], argtypes: tuple[types.Type, ...], options: _Options) -> _Compiled:
    """Where the runner is not built: the grid loop as a function of the arguments and the grid, called from
    Python on the launching thread."""
    assert isinstance(func, pytypes.FunctionType)  # a kernel rewritten in its chain
    grid_loop = _loops_function(func, argtypes, _ARGUMENTS_FIRST, SERIAL_LOOP, options, no_cfunc_wrapper=True)
    grid_loop.compile(serial_types(argtypes))
    grid_loop.disable_compile()
    return grid_loop
