"""A kernel as a task holds it (``od.map_blocks``' chunks, :mod:`overdub.scaleout`): :class:`Shipped`
pickles by value -- its def, as :class:`~overdub.byvalue.Shipper` ships defs -- with the token, so the
receiving process runs the kernel and the methods the sender has now; it arrives as its def, interned. A
kernel of an installed package travels by reference.
"""

from __future__ import annotations

import pickle
import types as pytypes

from .. import bridge
from ..libraries import is_library_module
from . import arrival, defs, snapshots
from .snapshots import Token

__all__ = ["Shipped"]


class Shipped:
    """A kernel as a task holds it: it pickles by value (its def, as :class:`~overdub.byvalue.Shipper` ships
    defs) with the token, so the receiving process runs the kernel and the methods the sender has now; it
    arrives as its def, :func:`interned`. A kernel of an installed package travels by reference."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel

    def __reduce__(self) -> tuple[object, ...]:
        func = bridge.python_function(self.kernel) or self.kernel
        if hasattr(self.kernel, "launch_defaults"):  # an od.jit kernel: with its options, its def as engines ship it
            return Shipped, (self.kernel,)
        if isinstance(func, pytypes.FunctionType) and func in defs.arrived_with:  # shipped on: as it came
            return _shipped_def_arriving, defs.arrived_with[func]
        if isinstance(func, pytypes.FunctionType) and not is_library_module(func.__module__):
            digest, blob, _ = defs.def_bytes(func)
            return _shipped_def_arriving, (snapshots.snapshot(), digest, blob)
        return _kernel_arriving, (snapshots.snapshot(), pickle.dumps(self.kernel))

    def __repr__(self) -> str:
        return f"Shipped({self.kernel!r})"


def _kernel_arriving(token: Token, kernel: bytes) -> Shipped:
    arrival.adopt(*token)
    return Shipped(pickle.loads(kernel))


def _shipped_def_arriving(token: Token, digest: str, blob: bytes) -> Shipped:
    return Shipped(defs.def_arriving(token, digest, blob))
