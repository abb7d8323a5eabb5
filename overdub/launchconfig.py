"""A launch's configuration as one record: :class:`LaunchConfig` (blocks, threads, shmem, stream, device, debug).

``od.cuda(kernel, *args, blocks=..., threads=...)``, ``kernel[blocks, threads, stream, shmem]`` of ``od.jit``,
``od.graph``'s captured launches and the slow path all take a launch's configuration; each builds the record once,
checked (:meth:`LaunchConfig.of`): a grid or block outside CUDA's limits, a bad shared memory size or something
that is no stream is refused there, with the message a launch function gives, on every target, before anything
compiles. What follows a check passes the record on as one value.

The fast path does not build it. ``od.cuda``'s lookup (in C where the extension is built) hands a launch
function the raw values, which the launch function checks itself in a few instructions (:func:`dims` and the
others below are its slow branches): building a record per launch would cost more than the launch. The record
is made where the fast path leaves off. ``kernel[blocks, threads]`` holds its record, and the native lookup
reads its fields by name (``_fastlaunch.OPTIONS``: the fields it shares with ``od.cuda``'s keywords).

While an ``od.jit`` kernel's launch compiles it, :func:`current_launch_config` is that launch's configuration as
numba-cuda's compile-time view has it (:class:`LaunchConfiguration`), on the launching thread only, for code
that compiles with it (a numba-cuda rewrite pass, as cuda.coop's are); :mod:`overdub.cuda.launchconfig` is the
module numba-cuda programs import it from.
"""

from __future__ import annotations

import contextlib
import numbers
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import wraps
from types import MethodType
from typing import Any

__all__ = [
    "LaunchConfig",
    "LaunchConfigError",
    "named",
    "Shape",
    "Extents",
    "dims",
    "shmem_bytes",
    "stream_handle",
    "LaunchConfiguration",
    "current_launch_config",
    "ensure_current_launch_config",
    "capture_compile_config",
    "here",
    "shape_of",
]


class LaunchConfigError(ValueError):
    """A launch's configuration (its grid, block or shared memory) is not one CUDA can launch; ``od.cuda``
    names the kernel in the message."""


def named(error: LaunchConfigError, kernel: object) -> LaunchConfigError:
    """``error`` as a launch of ``kernel`` gives it: the kernel named, for a program that launches many."""
    if str(error).startswith("od.cuda("):
        return error
    name = getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or type(kernel).__name__
    return LaunchConfigError(f"od.cuda({name}, ...): {error}")


Shape = tuple[int, int, int]
"""A grid or block shape, normalised: three positive ints."""

Extents = int | Shape
"""A grid or block shape as a :class:`LaunchConfig` keeps it: a plain int for one dimension (what a launch
function reads fastest), else three ints."""

# CUDA's limits (every GPU since compute capability 3.0), enforced on every target so that a launch the GPU
# would refuse is refused on the CPU too
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_SHMEM = 48 * 1024
"""The most dynamic shared memory a launch may ask for, in bytes: CUDA's limit per block for a kernel that has not
opted in to more (overdub's kernels do not), on every GPU; the driver refuses more with a bare error code."""


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """How a launch runs, checked: its grid (``blocks``) and block (``threads``) (:data:`Extents`), its dynamic
    shared memory in bytes, its ``stream`` (a cupy, numba or cuda.core stream; None: the default stream), the
    ``device`` it asks for (an ordinal; None: the device of the stream, else the one current on the launching
    thread) and whether its kernel is checked (``debug``; None: the kernel's or the target's default). Made by
    :meth:`of`, which checks it (the device is checked by the target that makes it current)."""

    blocks: Extents = 1
    threads: Extents = 1
    shmem: int = 0
    stream: object = None
    device: int | None = None
    debug: bool | None = None

    @classmethod
    def of(
        cls,
        blocks: object = 1,
        threads: object = 1,
        shmem: object = 0,
        stream: object = None,
        device: int | None = None,
        debug: bool | None = None,
    ) -> LaunchConfig:
        """The configuration of a launch given these options, checked as its launch function checks them: the
        grid, the block and the dynamic shared memory normalised; the stream's kind (a ValueError or TypeError
        for what a launch would refuse)."""
        if stream is not None:
            stream_handle(stream)
        checked = None if debug is None else bool(debug)
        return cls(
            _extents(blocks, "blocks"), _extents(threads, "threads"), shmem_bytes(shmem), stream, device, checked
        )

    def options(self) -> tuple[Extents, Extents, int, object]:
        """What a launch function takes after the arguments: (blocks, threads, shmem, stream)."""
        return self.blocks, self.threads, self.shmem, self.stream


def _extent(d: object) -> int:
    """``d`` as a grid or block extent, or 0 where it is none (not an integer, a bool, or out of range)."""
    if type(d) is int:  # the usual one, without numbers.Integral's abstract-class check (each launch asks)
        return d if 1 <= d <= MAX_GRID[0] else 0
    # numbers.Integral declares only < and <= (typeshed): hence d < 1 rather than 1 <= d
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 or not d <= MAX_GRID[0]:
        return 0
    return int(d)


def _extents(value: object, what: str) -> Extents:
    shape = dims(value, what)
    return shape[0] if shape[1:] == (1, 1) else shape


def dims(value: object, what: str) -> Shape:
    """A grid or block shape as three positive ints: an integer (numpy's too, not a bool) or a tuple of 1-3,
    within CUDA's limits for ``what`` ("blocks" or "threads")."""
    shape = tuple(map(_extent, value)) if isinstance(value, (tuple, list)) else (_extent(value),)
    if not 1 <= len(shape) <= 3 or 0 in shape:
        floats = [v for v in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(v, float)]
        hint = " (a float: divide with //, as in (n + 255) // 256, or round up with math.ceil)" if floats else ""
        raise LaunchConfigError(
            f"{what} must be a positive integer or a tuple of 1-3 positive integers (not bools), not {value!r}{hint}"
        )
    shape += (1,) * (3 - len(shape))
    x, y, z = shape
    limits = MAX_BLOCK if what == "threads" else MAX_GRID
    if x > limits[0] or y > limits[1] or z > limits[2] or (what == "threads" and x * y * z > MAX_THREADS_PER_BLOCK):
        extra = f" and {MAX_THREADS_PER_BLOCK} in all" if what == "threads" else ""
        raise LaunchConfigError(f"{what}={value!r} exceeds CUDA's limits: at most {limits} per dimension{extra}")
    return shape  # type: ignore[return-value]  # three: 1-3 extents padded with 1s above, which mypy cannot count


def shmem_bytes(value: object) -> int:
    """The dynamic shared memory of a launch: an integer (numpy's too, not a bool) from 0 to :data:`MAX_SHMEM`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise LaunchConfigError(f"shmem must be a non-negative integer (bytes of dynamic shared memory), not {value!r}")
    if not value <= MAX_SHMEM:  # numbers.Integral declares only < and <= (typeshed)
        raise LaunchConfigError(
            f"shmem={value!r} exceeds CUDA's limit of {MAX_SHMEM} bytes of dynamic shared memory per block"
        )
    return int(value)


def stream_handle(stream: object) -> int:
    """The CUstream handle of a cupy, numba or cuda.core stream (anything speaking ``__cuda_stream__``); read
    without the driver, so the CPU target refuses what the CUDA target would (it runs launches in order)."""
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    handle = getattr(stream, "ptr", None)  # cupy
    if handle is None:
        handle = getattr(stream, "handle", None)  # numba
        handle = getattr(handle, "value", handle)
    if handle is None:
        raise TypeError(f"stream= takes a cupy, numba or cuda.core stream, not {type(stream).__name__}")
    return int(handle)


# --- the launch configuration while a launch compiles (numba-cuda's numba.cuda.launchconfig) -----------------
# (overdub.cuda.launchconfig re-exports these for numba-cuda programs: see its docstring)

here = threading.local()
"""``here.config``: the launch compiling on this thread -- (its ``od.jit`` kernel, its :class:`LaunchConfig`, its
arguments) as a launch sets it (two attribute stores a launch), made a :class:`LaunchConfiguration` when read."""


class LaunchConfiguration:
    """One launch's configuration as numba-cuda's compile-time view has it."""

    __slots__ = ("dispatcher", "args", "griddim", "blockdim", "stream", "sharedmem")

    def __init__(self, dispatcher: object, config: LaunchConfig, args: tuple[object, ...]) -> None:
        self.dispatcher, self.args, self.stream, self.sharedmem = dispatcher, args, config.stream, config.shmem
        self.griddim, self.blockdim = shape_of(config.blocks), shape_of(config.threads)

    def __repr__(self) -> str:
        return f"LaunchConfiguration(griddim={self.griddim}, blockdim={self.blockdim}, sharedmem={self.sharedmem})"


def shape_of(extents: Extents) -> Shape:
    """A grid or block shape as three ints, as :class:`LaunchConfig` keeps it an int for one dimension."""
    return (extents, 1, 1) if isinstance(extents, int) else extents


def current_launch_config() -> Any:
    """The configuration of the launch compiling on this thread, or None."""
    config = getattr(here, "config", None)
    if type(config) is tuple:
        config = here.config = LaunchConfiguration(*config)
    if config is not None:
        return config
    numba_cudas = sys.modules.get("numba.cuda.launchconfig")  # a numba-cuda dispatcher's launch compiling
    return None if numba_cudas is None else numba_cudas.current_launch_config()


def ensure_current_launch_config() -> Any:
    """The configuration of the launch compiling on this thread; a RuntimeError where none is."""
    config = current_launch_config()
    if config is None:
        raise RuntimeError("No launch config set for this thread")
    return config


@contextlib.contextmanager
def capture_compile_config(dispatcher: Any) -> Iterator[dict[str, Any]]:
    """Meanwhile, record in the dict yielded (its ``"config"``) the launch configuration a compile of
    ``dispatcher`` triggered by a launch sees (None where nothing compiled)."""
    if dispatcher is None:
        raise TypeError("dispatcher is required")
    record: dict[str, Any] = {"config": None}
    missing = object()
    own = dispatcher.__dict__.get("_compile_for_args", missing)
    original = dispatcher._compile_for_args

    @wraps(original)
    def wrapped(self: object, *args: object, **kws: object) -> Any:
        record["config"] = current_launch_config()
        return original(*args, **kws)

    dispatcher._compile_for_args = MethodType(wrapped, dispatcher)
    try:
        yield record
    finally:
        if own is missing:
            del dispatcher._compile_for_args
        else:
            dispatcher._compile_for_args = own
