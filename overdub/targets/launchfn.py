"""Generated launch functions: the steps every target's Python launch path shares, in one place.

A launch function is generated per compiled kernel and argument classes, so that a launch runs straight-line
code: unpack the arguments, check the kernel is still valid (a flag, and one version tag per module it read),
check the argument guards of :mod:`overdub.arguments`, read the grid, the dynamic shared memory and the stream,
then the target's own statements (``body``: marshal and enqueue), and count the launch. The body sees the
arguments as ``a0, a1, ...``, the grid as ``gx, gy, gz`` and ``tx, ty, tz``, and ``shmem`` and ``stream``.

The launch configuration's checks (:func:`dims`, :func:`shmem_bytes`, :func:`stream_handle`) are also what
:func:`overdub.call.launch_slow` runs before anything is compiled: a bad configuration is refused at once, with
the message a launch function gives, on every target.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

from .. import arguments
from ..runtime import runtime

if TYPE_CHECKING:
    from ..arguments import Argument
    from ..compiler import Kernel
    from . import LaunchFunction


def _extent(d: object) -> int:
    """``d`` as a grid or block extent, or 0 where it is none (not an integer, a bool, or out of range)."""
    # numbers.Integral declares only < and <= (typeshed): hence d < 1 rather than 1 <= d
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 or not d <= MAX_GRID[0]:
        return 0
    return int(d)


# CUDA's limits (every GPU since compute capability 3.0), enforced on every target so that a launch the GPU
# would refuse is refused on the CPU too
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_SHMEM = 48 * 1024
"""The most dynamic shared memory a launch may ask for, in bytes: CUDA's limit per block for a kernel that has not
opted in to more (overdub's kernels do not), on every GPU; the driver refuses more with a bare error code."""


def dims(value: object, what: str) -> tuple[int, int, int]:
    """A grid or block shape as three positive ints: an integer (numpy's too, not a bool) or a tuple of 1-3,
    within CUDA's limits for ``what`` ("blocks" or "threads")."""
    shape = tuple(map(_extent, value)) if isinstance(value, (tuple, list)) else (_extent(value),)
    if not 1 <= len(shape) <= 3 or 0 in shape:
        raise ValueError(
            f"{what} must be a positive integer or a tuple of 1-3 positive integers (not bools), not {value!r}"
        )
    shape += (1,) * (3 - len(shape))
    limits = MAX_BLOCK if what == "threads" else MAX_GRID
    if any(n > limit for n, limit in zip(shape, limits)) or (
        what == "threads" and shape[0] * shape[1] * shape[2] > MAX_THREADS_PER_BLOCK
    ):
        extra = f" and {MAX_THREADS_PER_BLOCK} in all" if what == "threads" else ""
        raise ValueError(f"{what}={value!r} exceeds CUDA's limits: at most {limits} per dimension{extra}")
    return shape  # type: ignore[return-value]  # three: 1-3 extents padded with 1s above, which mypy cannot count


def shmem_bytes(value: object) -> int:
    """The dynamic shared memory of a launch: an integer (numpy's too, not a bool) from 0 to :data:`MAX_SHMEM`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"shmem must be a non-negative integer (bytes of dynamic shared memory), not {value!r}")
    if not value <= MAX_SHMEM:  # numbers.Integral declares only < and <= (typeshed)
        raise ValueError(
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


def checked_config(
    blocks: object, threads: object, shmem: object, stream: object
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """A launch's configuration checked as its launch function checks it: the grid, the block and the dynamic
    shared memory, normalised (three ints each, an int); the stream's kind."""
    config = dims(blocks, "blocks"), dims(threads, "threads"), shmem_bytes(shmem)
    if stream is not None:
        stream_handle(stream)
    return config


def argument_names(n: int) -> list[str]:
    return [f"a{i}" for i in range(n)]


def generate(
    kernel: Kernel,
    described: tuple[Argument, ...],
    body: list[str],
    namespace: dict[str, object],
    body_reads_stream: bool = False,
) -> LaunchFunction:
    """The launch function of ``kernel`` for arguments like the ``described`` ones (:class:`overdub.arguments.
    Argument`): guarded where every argument has a kind (``launch.guarded`` says whether it is), running
    ``body`` (the target's statements) with ``namespace``. ``body_reads_stream``: the body reads the stream's
    handle itself (with :func:`stream_handle`, which refuses what is no stream), so it is not read twice."""
    names = argument_names(len(described))
    guarded = arguments.signature_guards(names, described)
    conditions, consts = guarded if guarded is not None else ([], {})
    lines = [
        "def launch(args, blocks, threads, shmem, stream):",
        f"    {', '.join(names) + ',' if names else '_'} = args{'' if names else ' or ()'}",
        "    if not (kernel.valid and guard.fresh()) and not kernel.usable():",
        "        return False",
    ]
    if conditions:
        lines += [f"    if not ({' and '.join(conditions)}):", "        return False"]
    lines += [
        f"    gx, gy, gz = (blocks, 1, 1) if type(blocks) is int and 0 < blocks <= {MAX_GRID[0]} else "
        "dims(blocks, 'blocks')",
        f"    tx, ty, tz = (threads, 1, 1) if type(threads) is int and 0 < threads <= {MAX_THREADS_PER_BLOCK} "
        "else dims(threads, 'threads')",
        f"    if type(shmem) is not int or not 0 <= shmem <= {MAX_SHMEM}:",
        "        shmem = shmem_bytes(shmem)",
    ]
    if not body_reads_stream:
        lines += ["    if stream is not None:", "        stream_handle(stream)"]
    lines += [f"    {statement}" for statement in body]
    lines += ["    count_launch()", "    return True"]
    scope: dict[str, Any] = dict(
        namespace,
        **consts,
        kernel=kernel,
        guard=kernel.guard,
        dims=dims,
        shmem_bytes=shmem_bytes,
        stream_handle=stream_handle,
        count_launch=runtime.count_launch,
    )
    exec(compile("\n".join(lines) + "\n", f"<overdub launch of {kernel.describe()}>", "exec"), scope)
    launch = scope["launch"]
    launch.kernel, launch.guarded = kernel, guarded is not None
    function: LaunchFunction = launch  # the def just made, with the attributes the protocol reads
    return function
