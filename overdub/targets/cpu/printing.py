"""How CPU-target code prints: C's printf, from the kernel's threads; the launch flushes stdout when it ends.

Registered with :mod:`overdub.intrinsics` for numba's CPU target context: ``print`` and ``od.cuprintln`` in
kernels lower to this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from llvmlite import ir
from numba.core import cgutils
from numba.core.cpu import CPUContext

from ... import world
from ...intrinsics import LaunchNeed, register_print_lowering
from .state import Dim3Type, read_slot

if TYPE_CHECKING:
    from numba.core.base import BaseContext

    from ...bindings import Guarded

_I8P = ir.IntType(8).as_pointer()


class HostPrintf:
    """C's printf; the kernel being built needs its launches to flush stdout."""

    printable: tuple[type, ...] = (Dim3Type,)

    def item(self, context: BaseContext, builder: ir.IRBuilder, ty: Any, value: ir.Value) -> tuple[str, list[ir.Value]]:
        """``cuda.threadIdx`` and the others as numba-cuda prints its ``dim3``: ``(x, y, z)``, from the grid state."""
        return "(%lld, %lld, %lld)", [read_slot(builder, ty.first_slot + k) for k in range(3)]

    def string(self, context: BaseContext, builder: ir.IRBuilder, text: str) -> ir.Value:
        constant: ir.Value = context.insert_const_string(builder.module, text)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return constant

    def printf(self, context: BaseContext, builder: ir.IRBuilder, fmt: str, values: list[ir.Value]) -> None:
        printf = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]  # numba's is unannotated
            builder.module, ir.FunctionType(ir.IntType(32), [_I8P], var_arg=True), "printf"
        )
        builder.call(printf, [self.string(context, builder, fmt)] + values)
        built = cast("Guarded | None", world.being_built())  # at code generation: a compile's node
        if built is not None:
            built.needs.add(LaunchNeed.FLUSH_STDOUT)


register_print_lowering(CPUContext, HostPrintf())
