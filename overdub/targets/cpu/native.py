"""The CPU target's native launch functions: a launch packed and run in C, without a Python frame.

A CPU launch's generated Python function (:meth:`CPULauncher.launch_function`) checks each argument's guard
through numpy's attributes -- ``a.flags`` builds an object each time -- then calls the grid's entry, numba's
compiled function, whose wrapper unboxes every argument again: about 10 us for stumpy's 26 arguments, as long as
the grid itself for a small one. Where every argument is of a kind the extension packs (an int, float or bool
scalar, a pointer, a numpy array of numbers), the launch function is ``_fastlaunch.cpu_launcher``'s instead, the
CUDA target's native launcher with the CPU target's last step: it checks the kernel's validity and each
argument's guard as the Python one does, reads each array in place (numpy's C layout, checked on probe arrays
once per process), writes the launch tuple the grid body reads -- at the offsets numba lays that tuple out at,
computed here -- and runs the grid on the runner (``od_run``), the GIL released, on the workers the launch
function's :class:`~overdub.targets.cpu.workers.Workers` policy chooses. A checked (``debug=True``) launch, a
struct, a record array, a complex or half scalar keep the generated function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numba.core import types as nt
from numba.core.registry import cpu_target

from ... import arguments
from ...arguments import Argument, ArgumentKind
from ...runtime import runtime
from ..nativespecs import PointerSpec, ScalarSpec

try:
    from ... import _fastlaunch
except ImportError:  # built without a C compiler: the generated launch functions serve
    _fastlaunch = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ...compiler import Kernel
    from ..interface import LaunchFunction

__all__ = ["HostArraySpec", "launcher", "offsets", "spec"]

_CODES = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float32": "f",
    "float64": "d",
    "bool": "?",
}
"""The extension's scalar code of each numba scalar type it converts (float16 and complex are packed in Python)."""

HEADER = (0, 8, 16, 24, 32, 40, 48)
"""Where the launch tuple's grid and block extents and its parallel flag lie: the extension writes them there."""


@dataclass(frozen=True, slots=True)
class HostArraySpec:
    """A numpy array of ``dtype`` (not of records: their guard compares the struct too), rank ``ndim`` and
    ``layout`` ("C", "F", "A"), writeable or not, as numba's exploded array."""

    kind: ClassVar[str] = "n"
    dtype: np.dtype[Any]
    ndim: int
    itemsize: int
    layout: str
    writeable: bool


NativeSpec = ScalarSpec | PointerSpec | HostArraySpec


@functools.singledispatch
def spec(kind: ArgumentKind[Any, Any], argument: Argument) -> NativeSpec | None:
    """How the extension guards and packs ``argument`` (of ``kind``), or None: the generated function serves."""
    return None


@spec.register(arguments.PythonInt)
@spec.register(arguments.Scalar)
def _scalar(kind: ArgumentKind[Any, Any], argument: Argument) -> ScalarSpec | None:
    code = _CODES.get(str(argument.type))
    return None if code is None else ScalarSpec(code)


@spec.register
def _pointer(kind: arguments.PointerArgument, argument: Argument) -> PointerSpec:
    signature: tuple[np.dtype[Any], bool] = argument.signature  # type: ignore[assignment]  # a pointer's
    return PointerSpec(*signature)


@spec.register
def _array(kind: arguments.NumpyArray, argument: Argument) -> HostArraySpec | None:
    signature: arguments.ArraySignature = argument.signature  # type: ignore[assignment]  # a numpy array's
    dtype, ndim, layout, readonly = signature
    if dtype.fields is not None:
        return None
    return HostArraySpec(dtype, ndim, dtype.itemsize, layout, not readonly)


def _size(record: NativeSpec) -> int:
    """The bytes the extension writes for an argument of ``record``."""
    if isinstance(record, ScalarSpec):
        size: int = _fastlaunch.SCALAR_CODES[record.code]
        return size
    return 8 * (5 + 2 * record.ndim) if isinstance(record, HostArraySpec) else 8


def offsets(packed: nt.Tuple, records: Sequence[NativeSpec]) -> tuple[int, ...] | None:
    """Where each argument lies in the launch tuple of type ``packed`` (numba's layout of it, on this machine),
    or None where numba lays out its header or an argument otherwise than the extension writes them."""
    context = cpu_target.target_context
    llty = context.get_value_type(packed)
    data = context.target_data
    places = tuple(llty.get_element_offset(data, i) for i in range(len(llty.elements)))
    if places[: len(HEADER)] != HEADER:
        return None
    for element, record in zip(llty.elements[len(HEADER) :], records):
        if element.get_abi_size(data) != _size(record):
            return None
    return places[len(HEADER) :]


_numpy_layout: dict[str, bool] = {}
runtime.register_cache(f"{__name__}._numpy_layout", _numpy_layout, kept="a fact of the process: numpy's C layout")


def _numpy_layout_known() -> bool:
    """Whether the extension reads numpy arrays in place: numpy's layout checked on probe arrays (of every
    rank from 0 to 3, each layout, read-only or not), once per process."""
    known = _numpy_layout.get("numpy")
    if known is None:
        base = np.arange(24.0).reshape(2, 3, 4)
        frozen = np.ones(5, np.int32)
        frozen.flags.writeable = False
        probes = [np.array(1.5, np.float32), base, base.T, base[:, ::2], base[0], frozen, np.empty((0, 7), np.int8)]
        known = _numpy_layout["numpy"] = bool(_fastlaunch.set_numpy_layout(np.ndarray, [_probe(a) for a in probes]))
    return known


def _probe(a: np.ndarray[Any, Any]) -> tuple[object, ...]:
    flags = a.flags
    bits = int(flags.c_contiguous) | int(flags.f_contiguous) << 1 | int(flags.writeable) << 10
    return a, a.ctypes.data, a.shape, a.strides, a.dtype, bits


def launcher(
    kernel: Kernel,
    described: Sequence[Argument],
    packed: nt.Tuple,
    grid: tuple[int, int, int, int],
    policy: object,
    target: object,
    raise_error: Callable[[Kernel], object],
    stream_check: Callable[[object], object],
    flush: bool,
    every_worker: bool,
) -> LaunchFunction | None:
    """The native launch function of ``kernel`` for the ``described`` arguments (its launch tuple of type
    ``packed``; ``grid``: the runner's run function, the grid body, the runner's mode and a fiber's stack), or
    None where one argument has no spec, the extension or the runner is not built, or numba lays the tuple out
    otherwise than the extension writes it."""
    if _fastlaunch is None or not hasattr(_fastlaunch, "cpu_launcher"):
        return None
    records = [None if a.kind is None else spec(a.kind, a) for a in described]
    checks = kernel.guard.native_checks()
    if checks is None or any(r is None for r in records):
        return None
    specs: list[NativeSpec] = [r for r in records if r is not None]
    if any(isinstance(r, HostArraySpec) for r in specs) and not _numpy_layout_known():
        return None
    places = offsets(packed, specs)
    if places is None:
        return None
    return _fastlaunch.cpu_launcher(
        kernel, checks, specs, places, grid, policy, target, raise_error, stream_check, flush, every_worker
    )
