"""A store at a constant index into a launch's own array skips writing the bits memory holds, on the CPU target.

A GPU kernel may have every thread store the same value at one constant place -- stumpy's ``gpu_stump`` does
``QT_out[0] = QT_first[j]`` in each of a row's threads, a race every thread wins with the same value. On the GPU
those stores meet in the L2 cache; on the CPU target each one asks for the cache line for its core alone, so
the workers running a grid's blocks take the line from each other once a thread: on a 16-core host ``gpu_stump``
took 397 ms without this, 120 ms with it (``stump``, stumpy's own CPU code: 37-45 ms).

In a CPU target's grid body, ``a[k] = v`` and ``a[k0, k1] = v`` with constant indices, into an array of scalars
(integers, floats, booleans) that is one of the launch's own -- a kernel argument as the grid body reads it from
the launch tuple, through copies and branches (``QT_out = QT_even if j % 2 else QT_odd``), never an array the
kernel makes (a local or shared array, an allocation, a slice) -- first load the element and store only where
its bits differ from ``v``'s: a load shares the line between the workers where a store takes it. Skipping the
store where memory already holds its bits leaves what the store would have left, at the moment of the load; the
bits are compared, not the values (storing -0.0 over 0.0 still stores). Only the launch's own memory: LLVM
knows memory a kernel makes uninitialised, and reading it to compare is undefined (a branch on it let LLVM
delete a kernel's code); a launch's arrays come from the launch tuple, which it knows nothing of. Device
functions keep numba's store (their arrays may be the kernel's local ones).

Registered as ``static_setitem`` (numba's rewrite of a store at a constant index, which it lowers as its
setitem where nothing is registered) in a registry of numba's CPU target context alone, installed before the
CPU target's first compile: numba-cuda's lowering never sees it, and numba programs outside overdub keep
numba's store. Which array a store is into is read off the function numba is lowering (numba internals: the
``Lower`` on the stack, its IR's definitions).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.core import ir as numba_ir
from numba.core.imputils import Registry
from numba.core.ir_utils import build_definitions
from numba.core.registry import cpu_target
from numba.np.arrayobj import basic_indexing, load_item, make_array, normalize_indices, store_item

from ... import world
from ...runtime import runtime

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.templates import Signature

GRID_BODY = "<overdub grid body>"
"""The file name of the grid bodies' generated source (overdub/targets/cpu/grid.py), whose functions read the
launch tuple."""
LOADER = "load_args"
"""The grid body's name for the intrinsic reading the launch tuple (grid.py)."""

_SCALARS = (types.Integer, types.Float, types.Boolean)


def _bits(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """``value`` as an integer of its width (a float's bits)."""
    widths = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}
    width = widths.get(type(value.type))
    return value if width is None else builder.bitcast(value, ir.IntType(width))


def _lowering() -> tuple[Any, numba_ir.StaticSetItem] | None:
    """The ``Lower`` numba is lowering a static store with, and the store (numba internals)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "lower_inst":  # (only that frame's locals are read)
            found = frame.f_locals
            inst = found.get("inst")
            return (found.get("self"), inst) if isinstance(inst, numba_ir.StaticSetItem) else None
        frame = frame.f_back
    return None


def _launch_array(lower: Any, inst: numba_ir.StaticSetItem) -> bool:
    """Is the array ``inst`` stores into one of the launch's own: in a grid body, every definition of its
    variable, through copies, a parameter of the body's function or an element of the launch tuple?"""
    func_ir = lower.func_ir
    if getattr(func_ir.func_id, "filename", None) != GRID_BODY:
        return False
    definitions = build_definitions(func_ir.blocks)  # type: ignore[no-untyped-call]  # numba's is unannotated
    seen: set[str] = set()

    def from_launch(name: str) -> bool:
        if name in seen:  # a loop's copy of itself
            return True
        seen.add(name)
        found = definitions.get(name, [])
        return bool(found) and all(_launched(d, from_launch, func_ir) for d in found)

    return from_launch(inst.target.name)


def _launched(definition: object, from_launch: Any, func_ir: Any) -> bool:
    if isinstance(definition, numba_ir.Arg):
        return True
    if isinstance(definition, numba_ir.Var):
        return bool(from_launch(definition.name))
    if isinstance(definition, numba_ir.Expr):
        if definition.op in ("static_getitem", "exhaust_iter"):
            return bool(from_launch(definition.value.name))
        if definition.op == "call":
            callee = func_ir.get_definition(definition.func)
            return isinstance(callee, (numba_ir.Global, numba_ir.FreeVar)) and callee.name == LOADER
    return False


def _store_at_constant(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[Any]
) -> ir.Value | None:
    aryty, idxty, valty = sig.args
    target, index, value = args  # the index: numba's constant itself (a Python int, or a tuple of them)
    index_value = context.get_constant_generic(builder, idxty, index)  # type: ignore[no-untyped-call]  # numba's is unannotated
    numbas = context.get_function(operator.setitem, sig)  # type: ignore[no-untyped-call]  # numba's is unannotated
    if world.being_built() is None or not isinstance(aryty.dtype, _SCALARS) or valty != aryty.dtype:
        return numbas(builder, (target, index_value, value))
    lowering = _lowering()
    if lowering is None or not _launch_array(*lowering):
        return numbas(builder, (target, index_value, value))
    tupled = isinstance(idxty, types.BaseTuple)
    index_types = tuple(idxty) if tupled else (idxty,)
    indices = cgutils.unpack_tuple(builder, index_value, len(idxty)) if tupled else (index_value,)  # type: ignore[no-untyped-call]  # numba's is unannotated
    array = make_array(aryty)(context, builder, target)  # type: ignore[no-untyped-call]  # numba's is unannotated
    index_types, indices = normalize_indices(context, builder, index_types, indices)  # type: ignore[no-untyped-call]  # numba's is unannotated
    try:
        pointer, shapes, _ = basic_indexing(  # type: ignore[no-untyped-call]  # numba's is unannotated
            context, builder, aryty, array, index_types, indices, boundscheck=context.enable_boundscheck
        )
    except NotImplementedError:
        shapes = True
    if shapes:  # not one element: numba's store of a view
        return numbas(builder, (target, index_value, value))
    held = load_item(context, builder, aryty, pointer)  # type: ignore[no-untyped-call]  # numba's is unannotated
    with builder.if_then(builder.icmp_unsigned("!=", _bits(builder, held), _bits(builder, value))):
        store_item(context, builder, aryty, value, pointer)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return None


_registry = Registry("overdub.targets.cpu.stores")  # type: ignore[no-untyped-call]  # numba's is unannotated
for _index in (types.Integer, types.UniTuple):
    _registry.lower("static_setitem", types.Array, _index, types.Any)(_store_at_constant)  # type: ignore[no-untyped-call]  # numba's is unannotated
_installed: list[bool] = []
runtime.register_cache(f"{__name__}._installed", _installed, kept="a fact of the process: numba's CPU context has it")


def install() -> None:
    """Install the registry in numba's CPU target context, once, before the CPU target's first compile: after
    the context's first refresh (numba then loads its own registries; one installed before that hid the
    lowering of intrinsics numba registers later), which importing overdub does not pay for."""
    if not _installed:
        context = cpu_target.target_context
        context.refresh()
        context.install_registry(_registry)
        _installed.append(True)
