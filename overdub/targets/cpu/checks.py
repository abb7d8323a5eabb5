"""Checked kernels on the CPU target (``debug``): an out-of-range index raises an IndexError that names the
array, the index, the axis and its size, the thread and block, and the kernel line -- instead of a segfault.

numba's own bounds check (``boundscheck=True``) says only "index is out of bounds". Here each check site is
known while it is lowered: the statement being lowered names the array and the source line. On failure the
generated code writes the site, the index, the size and the grid position into a small record at an address
baked into the code, then raises numba's IndexError; the launch turns the record into the message.

Hack, admitted: the check is numba's ``cgutils.do_boundscheck``, replaced by a function that defers to it
except while a checked CPU kernel is compiled on this thread, and the site is read from numba's lowering frames
(``Lower.lower_inst``'s statement). tests/test_cpu_checks.py fails loudly if numba moves either.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import numpy as np
from llvmlite import ir
from numba.core import cgutils
from numba.core.base import BaseContext

from ...places import place
from ...runtime import runtime

__all__ = ["checking", "install", "raise_recorded"]

_numba_boundscheck = cgutils.do_boundscheck
_state = threading.local()
_sites: list[tuple[str, str]] = []  # site id -> (where, what is indexed)
_site_ids: dict[tuple[str, str], int] = {}
runtime.register_cache(f"{__name__}._sites", _sites, kept="site ids are compiled into checked code")
runtime.register_cache(f"{__name__}._site_ids", _site_ids, kept="site ids are compiled into checked code")
_RECORD = np.zeros(10, dtype=np.int64)  # site + 1, index, size, axis, thread xyz, block xyz
_I64 = ir.IntType(64)
_read_slot: Callable[[ir.IRBuilder, int], ir.Value] | None = None
_INLINED = re.compile(r"^[A-Za-z_]\w*?_v\d+_(.+)$")


def install(read_slot: Callable[[ir.IRBuilder, int], ir.Value]) -> None:
    """Give the checks the CPU target's reader of the grid state (thread and block indices)."""
    global _read_slot
    _read_slot = read_slot
    cgutils.do_boundscheck = _do_boundscheck


@contextlib.contextmanager
def checking(enabled: bool) -> Iterator[None]:
    """Compile checked code on this thread while inside (nested compiles of callees included)."""
    previous = getattr(_state, "enabled", False)
    _state.enabled = enabled
    try:
        yield
    finally:
        _state.enabled = previous


def _record_slot(index: int) -> ir.Value:
    return ir.Constant(_I64, _RECORD.ctypes.data + 8 * index).inttoptr(_I64.as_pointer())


def _do_boundscheck(
    context: BaseContext, builder: ir.IRBuilder, ind: ir.Value, dimlen: ir.Value, axis: int | ir.Value | None = None
) -> None:
    if not getattr(_state, "enabled", False):
        _numba_boundscheck(context, builder, ind, dimlen, axis)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return
    assert _read_slot is not None, "install() gives the reader before any checked kernel compiles"
    site = _site_id()
    ind, dimlen = _as_i64(builder, ind), _as_i64(builder, dimlen)
    outside = builder.or_(builder.icmp_signed(">=", ind, dimlen), builder.icmp_signed("<", ind, ind.type(0)))
    with cgutils.if_unlikely(builder, outside):  # type: ignore[no-untyped-call]  # numba's is unannotated
        axis_value = _as_i64(builder, -1 if axis is None else axis)
        values = [_I64(site + 1), ind, dimlen, axis_value] + [_read_slot(builder, slot) for slot in range(6)]
        for index, value in enumerate(values):
            builder.store(value, _record_slot(index))
        context.call_conv.return_user_exc(builder, IndexError, ("index is out of bounds",))  # type: ignore[attr-defined]  # each target's context has one


def _as_i64(builder: ir.IRBuilder, value: int | ir.Value) -> ir.Value:
    """A Python int or an LLVM integer as an i64 (sign-extended)."""
    if isinstance(value, int):
        return _I64(value)
    return builder.sext(value, _I64) if value.type.width < 64 else value


def _site_id() -> int:
    """The id of the check being generated: the source line and the array of the statement numba lowers."""
    where, what = "an unknown line", "an array"
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "lower_inst" and "inst" in frame.f_locals:
            inst = frame.f_locals["inst"]
            loc = getattr(inst, "loc", None)
            if loc is not None:
                where = place(loc.filename, loc.line)
            what = _indexed(inst)
            break
        frame = frame.f_back
    key = (where, what)
    site = _site_ids.get(key)
    if site is None:
        site = _site_ids[key] = len(_sites)
        _sites.append(key)
    return site


def _indexed(inst: object) -> str:
    """What a statement indexes: ``array 'a'`` for a named variable."""
    var = getattr(inst, "target", None)  # a[i] = v
    value: Any = getattr(inst, "value", None)
    if getattr(value, "op", None) in ("getitem", "static_getitem"):  # v = a[i]
        var = value.value
    name: str = getattr(var, "unversioned_name", None) or getattr(var, "name", None) or ""
    inlined = _INLINED.match(name)  # the kernel inlined into the grid loop: numba renames k's a as k_v4_a
    name = inlined.group(1) if inlined else name
    return f"array {name!r}" if name and not name.startswith(("$", "_v")) else "an array expression"


def raise_recorded(kernel_name: str) -> None:
    """Raise the IndexError the record describes (then clear it); return if nothing was recorded."""
    site = int(_RECORD[0]) - 1
    if site < 0:
        return
    index, size, axis = (int(v) for v in _RECORD[1:4])
    thread, block = tuple(int(v) for v in _RECORD[4:7]), tuple(int(v) for v in _RECORD[7:10])
    _RECORD[:] = 0
    where, what = _sites[site]
    on_axis = f" {axis}" if axis >= 0 else ""
    raise IndexError(  # in place of the runner's bare IndexError, which is only the signal: not chained
        f"index {index} is out of bounds for axis{on_axis} with size {size} of {what}, in thread "
        f"{thread} of block {block} of kernel {kernel_name} at {where}"
    ) from None
