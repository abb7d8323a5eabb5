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
from .runner import SYMBOL_PREFIX, need

if typing.TYPE_CHECKING:
    from ...bindings import Guarded

AT_BARRIER = 0x4F440001
"""A cut grid body's status when its thread stopped at a barrier (``_cpugrid.c`` names it too)."""

CUT_NAME = "overdub_grid_regions"
"""The qualified name of a grid body to cut (grid.py gives it): numba's symbol for the function holds it."""
GRID_NAME = "overdub_grid_body"
"""The qualified name of every other grid body (the row loop, the fibers' thread body)."""

_BARRIER = SYMBOL_PREFIX + "barrier"
_STATE_CALL = SYMBOL_PREFIX + "state"
_SHARED_CALL = SYMBOL_PREFIX + "shared"
_OTHER_WAITS = frozenset(SYMBOL_PREFIX + name for name in ("warp", "activemask", "grid_sync"))
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
# A frame: four int32 words (the resume point, a barrier's predicate, its count and threads), the block's cache of
# its shared arrays' addresses (a pointer to as many pointers as _cpugrid.c's MAX_SITES, null until a thread of
# the block asks the runner), then the thread's 12 state slots (state.py), which the runner writes once a block.
_CACHE = 16
_STATE = 24
_HEADER = _STATE + 12 * 8
_MAX_SITES = 64
_STATE_ALLOCA = "overdub.grid_state"  # the body's copy of them (state.py): the frame's slots themselves here
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
        for function in module.functions:
            if not function.is_declaration and CUT_NAME in function.name:
                size = cut(function, context.target_data)
                _outcome.size = size
                if size is not None:  # the one the code was cut for: the runner lays frames out by it
                    built = typing.cast("Guarded | None", world.being_built())
                    if built is not None:
                        built.needs.difference_update([n for n in built.needs if isinstance(n, Frame)])
                    need(Frame(size))
        lowered(module, library)

    context.post_lowering = post_lowering
    _installed.append(True)


# -- the cut ----------------------------------------------------------------------------------------------------


def cut(function: ir.Function, target_data: Any) -> int | None:
    """Cut ``function`` at its barriers, in place; its frame size, or None (the function left as it was) where
    it cannot be cut."""
    calls = [i for b in function.blocks for i in b.instructions if isinstance(i, ir.CallInstr)]
    called = {call.callee.name for call in calls if isinstance(call.callee, ir.Function)}
    barriers = [c for c in calls if isinstance(c.callee, ir.Function) and c.callee.name == _BARRIER]
    first = [arg for arg in function.args if arg.name == "arg.first"]  # the runner passes the frame there
    allocas = _allocas(function)
    if (
        called & _OTHER_WAITS
        or function.function_type.return_type != _I32
        or len(first) != 1
        or any(not isinstance(call.args[0], ir.Constant) for call in barriers)
        or any(a.operands and not isinstance(a.operands[0], ir.Constant) for a in allocas)
        or _layout(allocas, target_data) is None
    ):
        return None
    header = _Header(function, first[0])
    _read_state_in_frame(function, header)
    shared = [c for c in calls if isinstance(c.callee, ir.Function) and c.callee.name == _SHARED_CALL]
    for k, call in enumerate(shared[:_MAX_SITES]):
        _cache_shared(function, call, k, header)
    continuations = [_split(function, call, k, header) for k, call in enumerate(barriers, 1)]
    _demote_phis(function)
    _demote_crossing(function, header.block)
    framed = _live_across(function, continuations)
    state = [a for a in _allocas(function) if a.name == _STATE_ALLOCA and str(a.allocated_type) == "[12 x i64]"]
    for block in function.blocks:  # the alloca's zero-fill: the frame's slots hold the thread's state already
        for store in [i for i in block.instructions if isinstance(i, ir.StoreInstr) and i.operands[1] in state]:
            block.instructions.remove(store)
    offsets, size = _frame_offsets([a for a in _allocas(function) if a in framed and a not in state], target_data)
    offsets.update((alloca, _STATE) for alloca in state)
    _jump_to_resume(function, header, offsets, continuations)
    for k, call in enumerate(barriers, 1):
        _stop_at_barrier(call, header, k)
    _make_pass(function, size)
    return size


def _read_state_in_frame(function: ir.Function, header: _Header) -> None:
    """The thread's state slots read in its frame, where the runner wrote them, not through ``od_state``."""
    uses = _uses(function)
    for block in function.blocks:
        for call in [i for i in block.instructions if isinstance(i, ir.CallInstr)]:
            if isinstance(call.callee, ir.Function) and call.callee.name == _STATE_CALL:
                for use in uses.get(call, []):
                    _replace(use, call, header.state)
                block.instructions.remove(call)


def _cache_shared(function: ir.Function, call: ir.CallInstr, k: int, header: _Header) -> None:
    """The shared array of ``call`` (a call site of ``cuda.shared.array``) asked of the runner by the block's first
    thread to reach it, and read by the others from the block's cache: its address is the same for all."""
    block = call.parent
    after = _split_after(function, call, f"overdub.shared.{k}")
    builder = ir.IRBuilder(block)
    builder.position_before(call)
    entry = builder.gep(builder.load(header.cache), [ir.Constant(_I64, k)], inbounds=True)
    cached = builder.load(entry)
    block.instructions.remove(block.terminator)
    block.terminator = None
    block.instructions.remove(call)
    asking = function.insert_basic_block(function.blocks.index(block) + 1, f"overdub.ask_shared.{k}")
    builder.position_at_end(block)
    builder.cbranch(builder.icmp_unsigned("==", cached, ir.Constant(cached.type, None)), asking, after)
    builder.position_at_end(asking)
    call.parent = asking
    asking.instructions.append(call)
    builder.position_at_end(asking)
    builder.store(call, entry)
    builder.branch(after)
    builder.position_at_start(after)
    address = builder.phi(call.type)
    address.add_incoming(cached, block)
    address.add_incoming(call, asking)
    for use in _uses(function).get(call, []):
        if use is not address and not (isinstance(use, ir.StoreInstr) and use.parent is asking):
            _replace(use, call, address)


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
    """The cut function's new first block, and in it pointers to the thread's frame and its header's words."""

    def __init__(self, function: ir.Function, first: ir.Argument) -> None:
        self.start = function.entry_basic_block  # the kernel's start
        self.block = function.insert_basic_block(0, "overdub.resume")
        builder = ir.IRBuilder(self.block)
        self.frame = builder.inttoptr(first, ir.IntType(8).as_pointer())
        words = builder.bitcast(self.frame, _I32.as_pointer())
        self.resume, self.predicate, self.count, self.threads = (
            builder.gep(words, [ir.Constant(_I64, i)], inbounds=True) for i in range(4)
        )
        self.state = builder.bitcast(self._at(builder, _STATE), _I64.as_pointer())
        self.cache = builder.bitcast(self._at(builder, _CACHE), ir.IntType(8).as_pointer().as_pointer().as_pointer())

    def _at(self, builder: ir.IRBuilder, offset: int) -> ir.Value:
        return builder.gep(self.frame, [ir.Constant(_I64, offset)], inbounds=True)


# What the runner hands a pass (_cpugrid.c's regions_pass), by the address in its ``first`` argument: the threads
# [start, n) to run, the last barrier's counts for those resuming after it; back: the next barrier's count of true
# predicates and of arrivals, the live threads, the thread whose error the pass returns; the runner's state
# pointer (set to each thread's slots while it runs: callees compiled on their own read them there) and the frames.
_PASS = ir.LiteralStructType(
    [_I64, _I64, _I32, _I32, _I64, _I64, _I64, _I64, _I64.as_pointer().as_pointer(), ir.IntType(8).as_pointer()]
)
_START, _N, _RESULT_COUNT, _RESULT_N, _COUNT, _ARRIVED, _LIVE, _FAILED, _STATE_POINTER, _FRAMES = range(10)


def _make_pass(function: ir.Function, size: int) -> None:
    """Turn ``function`` (the cut body, for one thread) into a pass over a block's threads: its code moves to an
    internal, always inlined *step*, and ``function`` -- the symbol the runner calls -- becomes the loop calling
    the step for each thread not done, with its frame, so that no thread costs a call from the runner."""
    module = function.module
    step = ir.Function(module, function.function_type, function.name + ".step")
    step.linkage = "internal"
    step.attributes.update(a for a in function.attributes if a != "noinline")
    step.attributes.add("alwaysinline")
    for old, new in zip(function.args, step.args):
        new.attributes.update(old.attributes)
    arguments = dict(zip(function.args, step.args))
    for block in function.blocks:
        block.parent = step
        for instr in block.instructions:
            for op in _operands(instr):
                if op in arguments:
                    _replace(instr, op, arguments[op])
    step.blocks, function.blocks = function.blocks, []

    builder = ir.IRBuilder(function.append_basic_block("overdub.pass"))
    first = next(arg for arg in function.args if arg.name == "arg.first")
    info = builder.inttoptr(first, _PASS.as_pointer())

    def field(index: int) -> ir.Value:
        return builder.gep(info, [ir.Constant(_I32, 0), ir.Constant(_I32, index)], inbounds=True)

    start, n = builder.load(field(_START)), builder.load(field(_N))
    result_count, result_n = builder.load(field(_RESULT_COUNT)), builder.load(field(_RESULT_N))
    state_pointer, frames = builder.load(field(_STATE_POINTER)), builder.load(field(_FRAMES))
    head = function.append_basic_block("overdub.thread")
    run, stopped, ended = (function.append_basic_block(f"overdub.{name}") for name in ("run", "stopped", "ended"))
    failed, following, done = (function.append_basic_block(f"overdub.{name}") for name in ("failed", "next", "done"))
    entry = builder.block
    builder.cbranch(builder.icmp_signed("<", start, n), head, done)

    builder.position_at_end(head)
    thread = builder.phi(_I64)
    thread.add_incoming(start, entry)
    frame = builder.gep(frames, [builder.mul(thread, ir.Constant(_I64, size))], inbounds=True)
    words = builder.bitcast(frame, _I32.as_pointer())
    resume = builder.load(words)
    builder.cbranch(builder.icmp_signed("<", resume, ir.Constant(_I32, 0)), following, run)

    builder.position_at_end(run)
    builder.store(result_count, builder.gep(words, [ir.Constant(_I64, 2)], inbounds=True))
    builder.store(result_n, builder.gep(words, [ir.Constant(_I64, 3)], inbounds=True))
    slots = builder.bitcast(builder.gep(frame, [ir.Constant(_I64, _STATE)], inbounds=True), _I64.as_pointer())
    builder.store(slots, state_pointer)
    args = [builder.ptrtoint(frame, _I64) if arg is first else arg for arg in function.args]
    code = builder.call(step, args)
    builder.cbranch(builder.icmp_signed("==", code, ir.Constant(_I32, AT_BARRIER)), stopped, ended)

    def add(index: int, value: ir.Value) -> None:
        builder.store(builder.add(builder.load(field(index)), value), field(index))

    builder.position_at_end(stopped)
    predicate = builder.load(builder.gep(words, [ir.Constant(_I64, 1)], inbounds=True))
    add(_COUNT, builder.zext(builder.icmp_signed("!=", predicate, ir.Constant(_I32, 0)), _I64))
    add(_ARRIVED, ir.Constant(_I64, 1))
    builder.branch(following)

    builder.position_at_end(ended)
    builder.store(ir.Constant(_I32, -1), words)
    add(_LIVE, ir.Constant(_I64, -1))
    fine = builder.or_(
        builder.icmp_signed("==", code, ir.Constant(_I32, 0)), builder.icmp_signed("==", code, ir.Constant(_I32, -2))
    )
    builder.cbranch(fine, following, failed)

    builder.position_at_end(failed)
    builder.store(thread, field(_FAILED))
    builder.ret(code)

    builder.position_at_end(following)
    after = builder.add(thread, ir.Constant(_I64, 1))
    thread.add_incoming(after, following)
    builder.cbranch(builder.icmp_signed("<", after, n), head, done)

    builder.position_at_end(done)
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
    of 16 and of every alignment, so that each thread's frame is aligned as the first)."""
    layout = _layout(framed, target_data)
    assert layout is not None  # checked on every alloca before the cut
    offsets, offset, widest = {}, _HEADER, 16
    for alloca in framed:
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
        count = builder.load(header.count)
        op = call.args[0].constant  # 1 count, 2 and, 3 or (as _cpugrid.c's od_barrier)
        if op == 1:
            result = count
        elif op == 2:
            result = builder.zext(builder.icmp_signed("==", count, builder.load(header.threads)), _I32)
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
    switch = builder.switch(builder.load(header.resume), header.start)
    for k, cont in enumerate(continuations, 1):
        switch.add_case(k, cont)


def _stop_at_barrier(call: ir.CallInstr, header: _Header, k: int) -> None:
    """The barrier ``call``, which ends its block: its predicate and the thread's resume point k in the frame,
    and a return."""
    block = call.parent
    builder = ir.IRBuilder(block)
    builder.position_before(call)
    builder.store(call.args[1], header.predicate)
    builder.store(ir.Constant(_I32, k), header.resume)
    block.instructions.remove(call)
    block.instructions.remove(block.terminator)
    block.terminator = None
    builder.position_at_end(block)
    builder.ret(ir.Constant(_I32, AT_BARRIER))
