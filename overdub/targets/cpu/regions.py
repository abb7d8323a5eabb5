"""Kernels that synchronize, cut at their barriers: the CPU target's block regions.

A kernel using ``cuda.syncthreads`` (or its count/and/or forms) or shared memory needs a block's threads to
wait for each other. Running each thread as a fiber (``_cpugrid.c``'s block fibers) costs a stack and two
switches a thread per barrier, ~120 ns; a launch of a 1,024-thread barrier kernel took 20x what
``njit(parallel=True)`` takes for the same loop. Here the kernel's grid body is cut at its barriers instead
(POCL's work-group regions, in the form of a state machine): the compiled body, called for a thread, runs from
where the thread stands -- the kernel's start, or just after its k-th barrier -- to its next barrier, where it
records its arrival and returns ``AT_BARRIER``; every thread of the block runs in turn, a pass per region, and
the barrier completes between passes. What a thread holds across a barrier lives in its *frame*
(the runner's memory, whose address the body gets as its ``first`` argument); everything else stays in
registers.

The cut is made on the grid body's LLVM IR as numba lowered it (llvmlite's IR objects, before optimisation --
numba internals: ``BaseContext.post_lowering`` sees the module before it is compiled):

1. each barrier call ends its block: the rest of the block becomes a *continuation*; a barrier's result
   (``syncthreads_count`` and co.) is computed there from the counts the runner left in the frame;
2. every SSA value used outside its block, and every phi, is demoted to a stack slot (LLVM's reg2mem): no
   value then crosses a block boundary, so none crosses a barrier;
3. a stack slot is *live across a barrier* when some path from a continuation reads it before writing it whole
   (backward liveness over the blocks; a slot whose address escapes -- a local array, a pointer passed to a
   call or stored -- counts as live): those move to the frame, the others stay allocas, which LLVM promotes
   back to registers;
4. a new entry reads the thread's resume point from its frame's first word and jumps to the kernel's start or
   to continuation k; a barrier stores k and its predicate there and returns ``AT_BARRIER``;
5. the cut body becomes an internal, always inlined *step*, and the function the runner calls a *pass*: a loop
   over the block's threads not done, calling the step with each one's frame and counting the arrivals, so that
   a thread costs no call from the runner (a 256-thread block's launch 4.45 -> 2.8 us on the 2-core machine).

The thread's indices are read in its frame, where the runner writes them once a block (``od_state`` calls and
the body's copy of the state become the frame's slots), and a shared array's address is asked of the runner by
the block's first thread alone, the others reading the block's cache of them.

Only barriers in the grid body's own code are cut (the kernel inlined into it, numba's ``inline="always"``
callees too). A kernel that waits anywhere else -- a barrier in a device function compiled on its own, a warp
operation, a grid sync -- needs :attr:`~.runner.Need.FIBER_WAITS` and runs as fibers, as does a body this module
cannot cut (an alloca of a size known only at run time, a type aligned beyond 64 bytes).
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from llvmlite import ir
from numba.core.registry import cpu_target

from ... import world
from ...runtime import runtime
from .runner import SYMBOL_PREFIX, Need, need

if typing.TYPE_CHECKING:
    from ...bindings import Guarded

AT_BARRIER = 0x4F440002
"""A cut body's status when its thread stopped at a barrier giving it a false predicate (one more: a true one)."""
NO_SHARED = 0x4F440001
"""A pass's status when the runner could not give it a shared array (the grid failed; ``_cpugrid.c`` names it)."""

CUT_NAME = "overdub_grid_regions"
"""The qualified name of a grid body to cut (grid.py gives it): numba's symbol for the function holds it."""
GRID_NAME = "overdub_grid_body"
"""The qualified name of every other grid body (the row loop, the fibers' thread body)."""

_BARRIER = SYMBOL_PREFIX + "barrier"
_STATE_CALL = SYMBOL_PREFIX + "state"
_SHARED_CALL = SYMBOL_PREFIX + "shared"
_OTHER_WAITS = frozenset(SYMBOL_PREFIX + name for name in ("warp", "activemask", "grid_sync"))
_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
# A frame: an int32 word saying where the thread resumes (k after its k-th barrier, -1 once done; the block's first
# pass reads none: every thread starts), then the values the thread keeps across barriers.
_HEADER = 4
_STATE_ALLOCA = "overdub.grid_state"  # the body's copy of the thread's state (state.py): the pass's slots here
_MAX_ALIGN = 64  # the runner's frames are aligned so (FRAME_ALIGN)


@dataclasses.dataclass(frozen=True)
class Frame:
    """A need: a cut grid body keeps ``nbytes`` per thread in its frame (the launch passes it to the runner)."""

    nbytes: int


def frame_size(needs: Iterable[object]) -> int:
    """The frame each thread of a kernel run as block regions gets: exactly the one its code was cut for (its
    compiled pass steps by it)."""
    sizes = {need.nbytes for need in needs if isinstance(need, Frame)}
    if len(sizes) != 1:
        raise AssertionError(f"overdub internal error: a kernel run as block regions has frames {sorted(sizes)}")
    return sizes.pop()


def in_grid_body(builder: ir.IRBuilder) -> bool:
    """Is the code being generated a grid body's own (the kernel inlined), not a device function's?"""
    name = builder.function.name
    return CUT_NAME in name or GRID_NAME in name


# -- the hook -------------------------------------------------------------------------------------------------

_outcome = threading.local()  # the frame size of the last grid body cut on this thread, or None


def cutting() -> None:
    """Before compiling a grid body to cut: forget the last outcome."""
    _outcome.size = None


def cut_size() -> int | None:
    """After compiling a grid body to cut: its frame size, or None where it could not be cut."""
    size: int | None = getattr(_outcome, "size", None)
    return size


_installed: list[bool] = []
runtime.register_cache(f"{__name__}._installed", _installed, kept="a fact of the process: numba's CPU context has it")


def install() -> None:
    """Cut the grid bodies so named after numba lowers them, before they are compiled: a wrapper around numba's
    CPU context's ``post_lowering`` (installed once, before the CPU target's first compile)."""
    if _installed:
        return
    context = cpu_target.target_context
    lowered = context.post_lowering

    def post_lowering(module: ir.Module, library: Any) -> None:
        for function in list(module.functions):
            if not function.is_declaration and CUT_NAME in function.name:
                built = typing.cast("Guarded | None", world.being_built())
                size = cut(function, context.target_data, built is None or Need.GRID_STATE in built.needs)
                _outcome.size = size
                if size is not None:  # the one the code was cut for: the runner lays frames out by it
                    if built is not None:
                        built.needs.difference_update([n for n in built.needs if isinstance(n, Frame)])
                    need(Frame(size))
        lowered(module, library)

    context.post_lowering = post_lowering
    _installed.append(True)


# -- the cut ----------------------------------------------------------------------------------------------------


def cut(function: ir.Function, target_data: Any, state_in_memory: bool) -> int | None:
    """Cut ``function`` at its barriers, in place; its frame size, or None (the function left as it was) where
    it cannot be cut. ``state_in_memory``: callees compiled on their own read the thread's state in the runner's."""
    calls = [i for b in function.blocks for i in b.instructions if isinstance(i, ir.CallInstr)]
    called = {call.callee.name for call in calls if isinstance(call.callee, ir.Function)}
    barriers = [c for c in calls if isinstance(c.callee, ir.Function) and c.callee.name == _BARRIER]
    shared = [c for c in calls if isinstance(c.callee, ir.Function) and c.callee.name == _SHARED_CALL]
    first = [arg for arg in function.args if arg.name == "arg.first"]  # the runner passes the pass there
    allocas = _allocas(function)
    if (
        called & _OTHER_WAITS
        or function.function_type.return_type != _I32
        or len(first) != 1
        or any(not isinstance(call.args[0], ir.Constant) for call in barriers)
        or any(not isinstance(arg, ir.Constant) for call in shared for arg in call.args)
        or any(a.operands and not isinstance(a.operands[0], ir.Constant) for a in allocas)
        or _layout(allocas, target_data) is None
    ):
        return None
    step = _detach(function, len(shared))
    header = _Header(step, len(function.args), len(shared))
    _read_state(step, header)
    uses = _uses(step)
    for call, address in zip(shared, header.shared):  # the pass asks the runner for them, once for all threads
        for use in uses.get(call, []):
            _replace(use, call, address)
        call.parent.instructions.remove(call)
    continuations = [_split(step, call, k, header) for k, call in enumerate(barriers, 1)]
    uniform = _hoist_uniform(step, header)
    _demote_phis(step)
    _demote_crossing(step, header.block)
    framed = _live_across(step, continuations)
    builder = ir.IRBuilder(header.block)
    builder.position_at_end(header.block)
    for alloca, value in _set_alike(step, uniform).items():  # set at every step: not kept in the frame
        builder.store(value, alloca)
        framed.discard(alloca)
    for alloca in [a for a in _allocas(step) if a.name == _STATE_ALLOCA and str(a.allocated_type) == "[12 x i64]"]:
        for block in step.blocks:  # its zero-fill: the pass's slots hold the thread's state already
            for store in [i for i in block.instructions if isinstance(i, ir.StoreInstr) and i.operands[1] is alloca]:
                block.instructions.remove(store)
        slots = builder.bitcast(header.state, alloca.type)
        for use in _uses(step).get(alloca, []):
            _replace(use, alloca, slots)
        alloca.parent.instructions.remove(alloca)
        framed.discard(alloca)
    offsets, size = _frame_offsets([a for a in _allocas(step) if a in framed], target_data)
    _jump_to_resume(step, header, offsets, continuations)
    for k, call in enumerate(barriers, 1):
        _stop_at_barrier(call, header, k)
    _make_pass(function, step, size, shared, state_in_memory)
    return size


_PURE = (ir.CastInstr, ir.GEPInstr, ir.ExtractValue, ir.InsertValue, ir.ICMPInstr, ir.SelectInstr)
_ARITHMETIC = frozenset({"add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr"})  # none traps


def _hoist_uniform(step: ir.Function, header: _Header) -> set[ir.Value]:
    """Move to the header what every thread of the launch computes alike: loads of the packed launch arguments
    (memory no thread writes) and what casts, addresses, aggregates and arithmetic that cannot trap make of those,
    of the shared arrays' addresses and of constants. Every step recomputes them (cheap, and what it does not use LLVM drops) instead of
    keeping them per thread in frames. Returns the values the header has."""
    have: set[ir.Value] = set(step.args) | set(header.block.instructions)
    arguments = {arg for arg in step.args if arg.name == "arg.address"}  # the packed arguments (grid.py)
    changed = True
    while changed:
        changed = False
        for block in step.blocks[1:]:
            for instr in list(block.instructions):
                operands = _operands(instr)
                if not all(op in have or isinstance(op, (ir.Constant, ir.GlobalValue)) for op in operands):
                    continue
                if isinstance(instr, _PURE) or (type(instr) is ir.Instruction and instr.opname in _ARITHMETIC):
                    if isinstance(instr, (ir.CastInstr, ir.GEPInstr)) and operands[0] in arguments:
                        arguments.add(instr)
                elif not (isinstance(instr, ir.LoadInstr) and operands[0] in arguments):
                    continue
                block.instructions.remove(instr)
                instr.parent = header.block
                header.block.instructions.append(instr)
                have.add(instr)
                changed = True
    return have


def _set_alike(step: ir.Function, uniform: set[ir.Value]) -> dict[ir.AllocaInstr, ir.Value]:
    """The stack slots every store of which stores one value the header has, and nothing else writes (numba's
    variable holding an argument, a shared array): what they hold after the header, at every step."""
    alike: dict[ir.AllocaInstr, ir.Value] = {}
    others: set[ir.AllocaInstr] = set()
    allocas = set(_allocas(step))
    for block in step.blocks:
        for instr in block.instructions:
            operands = _operands(instr)
            if isinstance(instr, ir.StoreInstr) and operands[1] in allocas and operands[0] not in allocas:
                alloca, value = operands[1], operands[0]
                if value in uniform and alike.setdefault(alloca, value) is value:
                    continue
                others.add(alloca)
            elif not isinstance(instr, ir.LoadInstr):  # its address taken, written in part, or escaping
                others.update(op for op in operands if op in allocas)
    return {alloca: value for alloca, value in alike.items() if alloca not in others}


def _read_state(function: ir.Function, header: _Header) -> None:
    """The thread's state slots read where the pass keeps them, not through ``od_state``."""
    uses = _uses(function)
    for block in function.blocks:
        for call in [i for i in block.instructions if isinstance(i, ir.CallInstr)]:
            if isinstance(call.callee, ir.Function) and call.callee.name == _STATE_CALL:
                for use in uses.get(call, []):
                    _replace(use, call, header.state)
                block.instructions.remove(call)


def _detach(function: ir.Function, nshared: int) -> ir.Function:
    """Move ``function``'s code to a new internal, always inlined function, its *step*: ``function``'s parameters,
    then the thread's state slots, the last barrier's count and threads, where the thread resumes, and the
    addresses of the kernel's ``nshared`` shared arrays (:class:`_Header` names them)."""
    extra = [_I64.as_pointer(), _I32, _I32, _I32] + [_I8P] * nshared
    kind = ir.FunctionType(function.function_type.return_type, [*function.function_type.args, *extra])
    step = ir.Function(function.module, kind, function.name + ".step")
    step.linkage = "internal"
    step.attributes.update(a for a in function.attributes if a != "noinline")
    step.attributes.add("alwaysinline")
    for old, new in zip(function.args, step.args):
        new.attributes.update(old.attributes)
        new.name = old.name
    for k, new in enumerate(step.args[len(function.args) :]):
        new.name = f"overdub.{k}"
    step.scope = function.scope  # the names of the code moved are taken there: new ones are made unique there too
    arguments = dict(zip(function.args, step.args))
    for block in function.blocks:
        block.parent = step
        for instr in block.instructions:
            for op in _operands(instr):
                if op in arguments:
                    _replace(instr, op, arguments[op])
    step.blocks, function.blocks = function.blocks, []
    return step


def _split_after(function: ir.Function, instr: ir.Instruction, name: str) -> ir.Block:
    """End ``instr``'s block with a branch just after ``instr`` to a new block holding the rest, which it returns
    (the successors' phis updated)."""
    block = instr.parent
    at = block.instructions.index(instr)
    rest = function.insert_basic_block(function.blocks.index(block) + 1, name)
    moved = block.instructions[at + 1 :]
    del block.instructions[at + 1 :]
    for moving in moved:
        moving.parent = rest
    rest.instructions, rest.terminator = moved, block.terminator
    for successor in _successors(rest):
        for phi in _phis(successor):
            phi.incomings = [(value, rest if source is block else source) for value, source in phi.incomings]
    builder = ir.IRBuilder(block)
    block.terminator = None
    builder.position_at_end(block)
    builder.branch(rest)
    return rest


class _Header:
    """The step's new first block, the thread's frame and its resume word there, and the step's own parameters."""

    def __init__(self, step: ir.Function, nargs: int, nshared: int) -> None:
        self.state, self.count, self.threads, self.resume_at, *self.shared = step.args[nargs:]
        self.start = step.entry_basic_block  # the kernel's start
        self.block = step.insert_basic_block(0, "overdub.resume")
        builder = ir.IRBuilder(self.block)
        first = next(arg for arg in step.args if arg.name == "arg.first")  # the pass passes the frame there
        self.frame = builder.inttoptr(first, _I8P)
        self.resume = builder.bitcast(self.frame, _I32.as_pointer())


# What the runner hands a pass (_cpugrid.c's regions_pass), by the address in its ``first`` argument: the threads
# [start, n) to run, the last barrier's counts for those resuming after it; back: the next barrier's count of true
# predicates and of arrivals, the live threads, the thread whose error the pass returns; the runner's state
# pointer (where callees compiled on their own read the running thread's slots), the frames, whether the threads
# start afresh (no frame read), and the block's state slots (3-11; the pass counts the threads' 0-2).
_PASS = ir.LiteralStructType(
    [_I64, _I64, _I32, _I32, _I64, _I64, _I64, _I64, _I64.as_pointer().as_pointer(), _I8P, _I64, ir.ArrayType(_I64, 12)]
)
_START, _N, _RESULT_COUNT, _RESULT_N, _COUNT, _ARRIVED, _LIVE, _FAILED, _STATE_POINTER, _FRAMES, _FRESH, _SLOTS = range(
    12
)


def _make_pass(
    function: ir.Function, step: ir.Function, size: int, shared: Sequence[ir.CallInstr], state_in_memory: bool
) -> None:
    """Make ``function`` -- the symbol the runner calls, its code moved to ``step`` -- a pass over a block's
    threads: it asks the runner for the block's shared arrays (once, not once a thread) and calls the step,
    always inlined, for each thread not done, with its frame and its state, counting its indices, so that no
    thread costs a call or a division."""
    builder = ir.IRBuilder(function.append_basic_block("overdub.pass"))
    first = next(arg for arg in function.args if arg.name == "arg.first")
    info = builder.inttoptr(first, _PASS.as_pointer())

    def field(index: int, *at: int) -> ir.Value:
        indices = [ir.Constant(_I32, i) for i in (0, index, *at)]
        return builder.gep(info, indices, inbounds=True)

    start, n = builder.load(field(_START)), builder.load(field(_N))
    result_count, result_n = builder.load(field(_RESULT_COUNT)), builder.load(field(_RESULT_N))
    frames = builder.load(field(_FRAMES))
    fresh = builder.icmp_signed("!=", builder.load(field(_FRESH)), ir.Constant(_I64, 0))
    slots = builder.alloca(ir.ArrayType(_I64, 12), name="overdub.slots")

    def slot(k: int) -> ir.Value:
        return builder.gep(slots, [ir.Constant(_I32, 0), ir.Constant(_I32, k)], inbounds=True)

    for k in range(3, 12):
        builder.store(builder.load(field(_SLOTS, k)), slot(k))
    state = slot(0)
    if state_in_memory:
        builder.store(state, builder.load(field(_STATE_POINTER)))
    totals = {index: builder.alloca(_I64, name="overdub.total") for index in (_COUNT, _ARRIVED, _LIVE)}
    for total in totals.values():
        builder.store(ir.Constant(_I64, 0), total)
    addresses = [builder.call(call.callee, call.args) for call in shared]
    blocks = {
        name: function.append_basic_block(f"overdub.{name}")
        for name in ("threads", "thread", "run", "stopped", "ended", "failed", "next", "done", "no_shared")
    }
    missing = [builder.icmp_unsigned("==", address, ir.Constant(_I8P, None)) for address in addresses]
    if missing:
        any_missing = missing[0]
        for other in missing[1:]:
            any_missing = builder.or_(any_missing, other)
        builder.cbranch(any_missing, blocks["no_shared"], blocks["threads"])
    else:
        builder.branch(blocks["threads"])

    builder.position_at_end(blocks["no_shared"])
    builder.ret(ir.Constant(_I32, NO_SHARED))

    builder.position_at_end(blocks["threads"])  # the first thread's indices, divided out once a pass
    bx, by = builder.load(slot(6)), builder.load(slot(7))
    rest = builder.udiv(start, bx)
    x0, y0, z0 = builder.urem(start, bx), builder.urem(rest, by), builder.udiv(rest, by)
    builder.cbranch(builder.icmp_signed("<", start, n), blocks["thread"], blocks["done"])

    builder.position_at_end(blocks["thread"])
    thread, x, y, z = (builder.phi(_I64) for _ in range(4))
    for phi, value in zip((thread, x, y, z), (start, x0, y0, z0)):
        phi.add_incoming(value, blocks["threads"])
    for k, value in enumerate((x, y, z)):
        builder.store(value, slot(k))
    frame = builder.gep(frames, [builder.mul(thread, ir.Constant(_I64, size))], inbounds=True)
    word = builder.bitcast(frame, _I32.as_pointer())
    resume = builder.select(fresh, ir.Constant(_I32, 0), builder.load(word))
    builder.cbranch(builder.icmp_signed("<", resume, ir.Constant(_I32, 0)), blocks["next"], blocks["run"])

    builder.position_at_end(blocks["run"])
    args = [builder.ptrtoint(frame, _I64) if arg is first else arg for arg in function.args]
    code = builder.call(step, [*args, state, result_count, result_n, resume, *addresses])
    stop = builder.sub(code, ir.Constant(_I32, AT_BARRIER))
    builder.cbranch(builder.icmp_unsigned("<", stop, ir.Constant(_I32, 2)), blocks["stopped"], blocks["ended"])

    def add(index: int, value: ir.Value) -> None:
        builder.store(builder.add(builder.load(totals[index]), value), totals[index])

    def report() -> None:  # the totals into the runner's record
        for index, total in totals.items():
            builder.store(builder.add(builder.load(field(index)), builder.load(total)), field(index))

    builder.position_at_end(blocks["stopped"])
    add(_COUNT, builder.zext(stop, _I64))
    add(_ARRIVED, ir.Constant(_I64, 1))
    builder.branch(blocks["next"])

    builder.position_at_end(blocks["ended"])
    builder.store(ir.Constant(_I32, -1), word)
    add(_LIVE, ir.Constant(_I64, -1))
    fine = builder.or_(
        builder.icmp_signed("==", code, ir.Constant(_I32, 0)), builder.icmp_signed("==", code, ir.Constant(_I32, -2))
    )
    builder.cbranch(fine, blocks["next"], blocks["failed"])

    builder.position_at_end(blocks["failed"])
    builder.store(thread, field(_FAILED))
    report()
    builder.ret(code)

    builder.position_at_end(blocks["next"])  # the next thread, its indices counted
    after = builder.add(thread, ir.Constant(_I64, 1))
    x1 = builder.add(x, ir.Constant(_I64, 1))
    wrap_x = builder.icmp_signed("==", x1, bx)
    y1 = builder.add(y, builder.zext(wrap_x, _I64))
    wrap_y = builder.icmp_signed("==", y1, by)
    for phi, value in zip(
        (thread, x, y, z),
        (
            after,
            builder.select(wrap_x, ir.Constant(_I64, 0), x1),
            builder.select(wrap_y, ir.Constant(_I64, 0), y1),
            builder.add(z, builder.zext(wrap_y, _I64)),
        ),
    ):
        phi.add_incoming(value, blocks["next"])
    builder.cbranch(builder.icmp_signed("<", after, n), blocks["thread"], blocks["done"])

    builder.position_at_end(blocks["done"])
    report()
    builder.ret(ir.Constant(_I32, 0))


def _allocas(function: ir.Function) -> list[ir.AllocaInstr]:
    return [i for b in function.blocks for i in b.instructions if isinstance(i, ir.AllocaInstr)]


def _layout(allocas: Sequence[ir.AllocaInstr], target_data: Any) -> dict[ir.AllocaInstr, tuple[int, int]] | None:
    """Each alloca's (size, alignment), or None where one is aligned beyond the frames'."""
    layout = {}
    for alloca in allocas:
        count = int(alloca.operands[0].constant) if alloca.operands else 1
        ty = alloca.allocated_type
        align = max(ty.get_abi_alignment(target_data), alloca.align or 1)
        if align > _MAX_ALIGN:
            return None
        layout[alloca] = (ty.get_abi_size(target_data) * count, align)
    return layout


def _frame_offsets(framed: Sequence[ir.AllocaInstr], target_data: Any) -> tuple[dict[ir.AllocaInstr, int], int]:
    """Where each framed alloca sits in a thread's frame, after the resume word, and the frame's size (a multiple
    of every alignment, so that each thread's frame is aligned as the first). The narrowest first: an int32 fills
    the space the resume word leaves before an 8-byte alignment."""
    layout = _layout(framed, target_data)
    assert layout is not None  # checked on every alloca before the cut
    offsets, offset, widest = {}, _HEADER, _HEADER
    for alloca in sorted(framed, key=lambda alloca: layout[alloca][1]):
        size, align = layout[alloca]
        offset = -(-offset // align) * align
        offsets[alloca] = offset
        offset += size
        widest = max(widest, align)
    return offsets, -(-offset // widest) * widest


def _successors(block: ir.Block) -> list[ir.Block]:
    term = block.terminator
    if isinstance(term, ir.SwitchInstr):
        return [term.default, *(target for _, target in term.cases)]
    if isinstance(term, (ir.Branch, ir.ConditionalBranch)):
        return [op for op in term.operands if isinstance(op, ir.Block)]
    return []


def _split(function: ir.Function, call: ir.CallInstr, k: int, header: _Header) -> ir.Block:
    """End ``call``'s block at ``call``, the rest of it a new block (the continuation of barrier ``k``, which it
    returns), and compute the barrier's result there from the words the runner left in the frame."""
    cont = _split_after(function, call, f"overdub.after_barrier.{k}")
    builder = ir.IRBuilder(cont)
    uses = _uses(function).get(call)
    if uses:
        builder.position_at_start(cont)
        count = header.count
        op = call.args[0].constant  # 1 count, 2 and, 3 or (as _cpugrid.c's od_barrier)
        if op == 1:
            result = count
        elif op == 2:
            result = builder.zext(builder.icmp_signed("==", count, header.threads), _I32)
        else:
            result = builder.zext(builder.icmp_signed(">", count, ir.Constant(_I32, 0)), _I32)
        for use in uses:
            _replace(use, call, result)
    return cont


def _phis(block: ir.Block) -> list[ir.PhiInstr]:
    return [i for i in block.instructions if isinstance(i, ir.PhiInstr)]


def _operands(instr: ir.Instruction) -> list[Any]:
    if isinstance(instr, ir.PhiInstr):
        return [value for value, _ in instr.incomings]
    return list(instr.operands)


def _uses(function: ir.Function) -> dict[Any, list[ir.Instruction]]:
    uses: dict[Any, list[ir.Instruction]] = {}
    for block in function.blocks:
        for instr in block.instructions:
            for op in _operands(instr):
                if isinstance(op, ir.Instruction):
                    uses.setdefault(op, []).append(instr)
    return uses


def _replace(instr: ir.Instruction, old: ir.Value, new: ir.Value) -> None:
    """``old`` replaced by ``new`` among ``instr``'s operands (and the attributes llvmlite prints some from)."""
    if isinstance(instr, ir.PhiInstr):
        instr.incomings = [(new if value is old else value, block) for value, block in instr.incomings]
    else:
        instr.operands = [new if op is old else op for op in instr.operands]
        if isinstance(instr, ir.GEPInstr):
            instr.pointer = new if instr.pointer is old else instr.pointer
            instr.indices = [new if index is old else index for index in instr.indices]
        elif isinstance(instr, (ir.ExtractValue, ir.InsertValue)):
            instr.aggregate = new if instr.aggregate is old else instr.aggregate
            if isinstance(instr, ir.InsertValue) and instr.value is old:
                instr.value = new
    instr._clear_string_cache()


def _slot(function: ir.Function, ty: ir.Type, name: str) -> ir.AllocaInstr:
    builder = ir.IRBuilder(function.entry_basic_block)
    builder.position_at_start(function.entry_basic_block)
    slot: ir.AllocaInstr = builder.alloca(ty, name=name)
    return slot


def _demote_phis(function: ir.Function) -> None:
    """Every phi a stack slot: loaded where the phi was, stored at the end of each predecessor (a phi's value
    there, where it is another phi's incoming value, is that phi's load: what it held on entering its block)."""
    loads: dict[ir.PhiInstr, ir.LoadInstr] = {}
    slots: dict[ir.PhiInstr, ir.AllocaInstr] = {}
    for block in list(function.blocks):
        builder = ir.IRBuilder(block)
        for phi in _phis(block):
            slots[phi] = _slot(function, phi.type, "overdub.phi")
            builder.position_before(phi)
            loads[phi] = builder.load(slots[phi])
    for phi, slot in slots.items():
        builder = ir.IRBuilder(phi.parent)
        for value, source in phi.incomings:
            builder.position_before(source.terminator)
            builder.store(loads.get(value, value), slot)
    uses = _uses(function)
    for phi, loaded in loads.items():
        phi.parent.instructions.remove(phi)
        for use in uses.get(phi, []):
            _replace(use, phi, loaded)


def _demote_crossing(function: ir.Function, entry: ir.Block) -> None:
    """Every value used outside its block a stack slot: stored after its definition, loaded before each such use
    (but the new first block's, which every step runs first)."""
    uses = _uses(function)
    for block in list(function.blocks):
        if block is entry:
            continue
        for instr in list(block.instructions):
            if isinstance(instr, ir.AllocaInstr):
                continue
            outside = [use for use in uses.get(instr, []) if use.parent is not block]
            if not outside:
                continue
            slot = _slot(function, instr.type, "overdub.value")
            builder = ir.IRBuilder(block)
            builder.position_after(instr)
            builder.store(instr, slot)
            for use in outside:
                builder.position_before(use)
                _replace(use, instr, builder.load(slot))


_POINTER_STEPS = (ir.GEPInstr, ir.CastInstr)


def _live_across(function: ir.Function, continuations: Sequence[ir.Block]) -> set[ir.AllocaInstr]:
    """The allocas a thread may read after a barrier before writing them whole: live at the start of some
    continuation, or escaping (an address that leaves loads and stores: conservatively live)."""
    root: dict[Any, ir.AllocaInstr] = {a: a for a in _allocas(function)}
    changed = True
    while changed:  # pointers derived from an alloca (GEPs, casts), through any order of the blocks
        changed = False
        for block in function.blocks:
            for instr in block.instructions:
                if isinstance(instr, _POINTER_STEPS) and instr not in root and instr.operands[0] in root:
                    root[instr] = root[instr.operands[0]]
                    changed = True
    escaped: set[ir.AllocaInstr] = set()
    gen: dict[ir.Block, set[ir.AllocaInstr]] = {}
    kill: dict[ir.Block, set[ir.AllocaInstr]] = {}
    for block in function.blocks:
        reads, writes = gen.setdefault(block, set()), kill.setdefault(block, set())
        for instr in block.instructions:
            if isinstance(instr, ir.LoadInstr) and instr.operands[0] in root:
                alloca = root[instr.operands[0]]
                if alloca not in writes:
                    reads.add(alloca)
            elif isinstance(instr, ir.StoreInstr) and instr.operands[1] in root:
                value, pointer = instr.operands
                if value in root:
                    escaped.add(root[value])
                if pointer is root[pointer] and value.type == pointer.allocated_type:
                    writes.add(pointer)  # a whole store; a partial one leaves the rest as it was
            elif not (isinstance(instr, _POINTER_STEPS) and instr.operands[0] in root):
                escaped.update(root[op] for op in _operands(instr) if op in root)
    live: dict[ir.Block, set[ir.AllocaInstr]] = {block: set() for block in function.blocks}
    changed = True
    while changed:
        changed = False
        for block in reversed(function.blocks):
            out: set[ir.AllocaInstr] = set()
            for successor in _successors(block):
                out |= live[successor]
            new = gen[block] | (out - kill[block])
            if new != live[block]:
                live[block], changed = new, True
    framed = set(escaped)
    for cont in continuations:
        framed |= live[cont]
    return framed


def _jump_to_resume(
    function: ir.Function, header: _Header, offsets: dict[ir.AllocaInstr, int], continuations: Sequence[ir.Block]
) -> None:
    """Finish the first block: the allocas that stay, the framed ones' places in the thread's frame, and the jump
    to where the thread resumes (the kernel's start, the block after the header, or a continuation)."""
    entry = header.block
    for alloca in _allocas(function):
        alloca.parent.instructions.remove(alloca)
        if alloca not in offsets:
            alloca.parent = entry
            entry.instructions.insert(0, alloca)
    builder = ir.IRBuilder(entry)
    builder.position_at_end(entry)
    uses = _uses(function)
    for alloca, offset in offsets.items():
        place = builder.bitcast(builder.gep(header.frame, [ir.Constant(_I64, offset)], inbounds=True), alloca.type)
        for use in uses.get(alloca, []):
            _replace(use, alloca, place)
    switch = builder.switch(header.resume_at, header.start)
    for k, cont in enumerate(continuations, 1):
        switch.add_case(k, cont)


def _stop_at_barrier(call: ir.CallInstr, header: _Header, k: int) -> None:
    """The barrier ``call``, which ends its block: the thread's resume point k in the frame, and a return of
    AT_BARRIER, plus one where the thread's predicate is true."""
    block = call.parent
    builder = ir.IRBuilder(block)
    builder.position_before(call)
    builder.store(ir.Constant(_I32, k), header.resume)
    true = builder.icmp_signed("!=", call.args[1], ir.Constant(call.args[1].type, 0))
    block.instructions.remove(call)
    block.instructions.remove(block.terminator)
    block.terminator = None
    builder.position_at_end(block)
    builder.ret(builder.add(ir.Constant(_I32, AT_BARRIER), builder.zext(true, _I32)))
