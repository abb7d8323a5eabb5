"""How CUDA-target code prints: CUDA's device ``vprintf``, its arguments packed in a local buffer; string
constants in the constant address space. The driver prints the buffer when the kernel ends.

Registered with :mod:`overdub.intrinsics` for numba-cuda's target context: ``print`` and ``od.cuprintln`` in
kernels lower to this.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import NumbaWarning

from ...intrinsics import register_print_lowering

if TYPE_CHECKING:
    from numba.core.base import BaseContext

    nvvmutils: Any  # numba-cuda's (mypy reads numba's older numba.cuda)
    CUDATargetContext: Any
    Bfloat16: Any
    Dim3: Any
else:
    from numba.cuda import nvvmutils
    from numba.cuda.target import CUDATargetContext
    from numba.cuda.types.ext_types import Bfloat16, Dim3

_I8P = ir.IntType(8).as_pointer()


MAX_VALUES = 32
"""The most arguments CUDA's vprintf prints; numba-cuda emits the raw format string for more, and says so."""


class DeviceVprintf:
    """CUDA's vprintf: the format and a pointer to the packed arguments; numba-cuda's ``dim3`` prints as a
    tuple, its ``bfloat16`` as a float."""

    printable: tuple[type, ...] = (Dim3, Bfloat16)

    def item(self, context: BaseContext, builder: ir.IRBuilder, ty: Any, value: ir.Value) -> tuple[str, list[ir.Value]]:
        """A ``dim3`` (``cuda.threadIdx``...) as numba-cuda prints it, ``(x, y, z)``; a ``bfloat16`` as a
        float, ``0.937500`` (promoted to double, as C varargs are)."""
        if isinstance(ty, Bfloat16):
            return "%f", [context.cast(builder, value, ty, types.float64)]  # type: ignore[no-untyped-call]  # numba's is unannotated
        return "(%d, %d, %d)", [builder.extract_value(value, k) for k in range(3)]

    def string(self, context: BaseContext, builder: ir.IRBuilder, text: str) -> ir.Value:
        constant: ir.Value = context.insert_string_const_addrspace(builder, text)  # type: ignore[attr-defined]  # numba-cuda's context's
        return constant

    def printf(self, context: BaseContext, builder: ir.IRBuilder, fmt: str, values: list[ir.Value]) -> None:
        vprintf = nvvmutils.declare_vprint(builder.module)
        if len(values) > MAX_VALUES:
            warnings.warn(
                f"CUDA print() cannot print more than {MAX_VALUES} items. The raw format string will be emitted "
                f"by the kernel instead.",
                NumbaWarning,
                stacklevel=2,
            )
            fmt, values = fmt.replace("%", "%%"), []
        if values:
            packed = cgutils.make_anonymous_struct(builder, values)  # type: ignore[no-untyped-call]  # numba's is unannotated
            buffer = builder.bitcast(cgutils.alloca_once_value(builder, packed), _I8P)  # type: ignore[no-untyped-call]  # numba's is unannotated
        else:
            buffer = ir.Constant(_I8P, None)
        builder.call(vprintf, (self.string(context, builder, fmt), buffer))


register_print_lowering(CUDATargetContext, DeviceVprintf())
