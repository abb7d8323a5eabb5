"""A store at a constant index that leaves memory as it was does not write, on the CPU target.

A GPU kernel may have every thread store the same value at one constant place -- stumpy's ``gpu_stump`` does
``QT_out[0] = QT_first[j]`` in each of a row's threads, a race every thread wins with the same value. On the GPU
those stores meet in the L2 cache; on the CPU target each one asks for the cache line for its core alone, so
the workers running a grid's blocks take the line from each other once a thread, and two workers ran the kernel
slower than one (a 15,000-thread grid-stride kernel with such a store: 26 us on two workers, 22 us on one;
without it 13 and 21 us).

In kernels and methods overdub compiles for the CPU target, ``a[k] = v`` and ``a[k0, k1] = v`` with constant
indices of a scalar (integer, float or boolean) element first load the element and store only where its bits
differ from ``v``'s: a load shares the line between the workers where a store takes it. Skipping the store
where memory already holds its bits is what the store would have left, at the moment of the load, so every
result one thread or racing threads could give with the store, they can give without it (the bits compared,
not the values: storing -0.0 over 0.0 still stores). Other stores are numba's. Registered as ``static_setitem``
(numba's rewrite of a store at a constant index, which it lowers as its setitem where nothing is registered) in
a registry of numba's CPU target context alone: numba-cuda's lowering never sees it, and numba programs outside
overdub keep numba's store.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry
from numba.core.registry import cpu_target
from numba.np.arrayobj import basic_indexing, load_item, make_array, normalize_indices, store_item

from ... import world
from ...runtime import runtime

if TYPE_CHECKING:
    from numba.core.base import BaseContext
    from numba.core.typing.templates import Signature

_SCALARS = (types.Integer, types.Float, types.Boolean)


def _bits(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """``value`` as an integer of its width (a float's bits)."""
    if isinstance(value.type, (ir.FloatType, ir.DoubleType, ir.HalfType)):
        width = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(value.type)]
        return builder.bitcast(value, ir.IntType(width))
    return value


def _store_at_constant(
    context: BaseContext, builder: ir.IRBuilder, sig: Signature, args: Sequence[Any]
) -> ir.Value | None:
    aryty, idxty, valty = sig.args
    target, index, value = args  # the index: numba's constant itself (a Python int, or a tuple of them)
    index_value = context.get_constant_generic(builder, idxty, index)  # type: ignore[no-untyped-call]  # numba's is unannotated
    numbas = context.get_function(operator.setitem, sig)  # type: ignore[no-untyped-call]  # numba's is unannotated
    if world.being_built() is None or not isinstance(aryty.dtype, _SCALARS) or valty != aryty.dtype:
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
runtime.register_cache(
    f"{__name__}._installed", _installed, kept="a fact of the process: numba's CPU context has the registry"
)


def install() -> None:
    """Install the registry in numba's CPU target context, once, before the CPU target's first compile: after
    the context's first refresh (numba then loads its own registries; installed before that, one of ours
    hid the lowering of intrinsics numba registers later), which importing overdub does not pay for."""
    if not _installed:
        context = cpu_target.target_context
        context.refresh()
        context.install_registry(_registry)
        _installed.append(True)
