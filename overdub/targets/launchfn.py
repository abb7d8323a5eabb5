"""Generated launch functions: the steps every target's Python launch path shares, in one place.

A launch function is generated per compiled kernel and argument classes, so that a launch runs straight-line
code: unpack the arguments, check the kernel is still valid (a flag, and one version tag per module it read),
check the argument guards of :mod:`overdub.arguments`, read the grid, then the target's own statements
(``body``: marshal and enqueue), and count the launch. The body sees the arguments as ``a0, a1, ...``, the
grid as ``gx, gy, gz`` and ``tx, ty, tz``, and ``shmem`` and ``stream``.
"""

from __future__ import annotations

import numbers

from .. import arguments
from ..runtime import runtime


def _extent(d) -> int | None:
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or not 1 <= d <= MAX_GRID[0]:
        return None
    return int(d)


# CUDA's limits (every GPU since compute capability 3.0), enforced on every target so that a launch the GPU
# would refuse is refused on the CPU too
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


def dims(value, what: str) -> tuple[int, int, int]:
    """A grid or block shape as three positive ints: an integer (numpy's too, not a bool) or a tuple of 1-3,
    within CUDA's limits for ``what`` ("blocks" or "threads")."""
    shape = tuple(map(_extent, value)) if isinstance(value, (tuple, list)) else (_extent(value),)
    if not 1 <= len(shape) <= 3 or None in shape:
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
    return shape


def argument_names(n: int) -> list[str]:
    return [f"a{i}" for i in range(n)]


def generate(kernel, described: tuple, body: list[str], namespace: dict):
    """The launch function of ``kernel`` for arguments like the ``described`` ones (:class:`overdub.arguments.
    Argument`): guarded where every argument has a kind (``launch.guarded`` says whether it is), running
    ``body`` (the target's statements) with ``namespace``."""
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
    ]
    lines += [f"    {statement}" for statement in body]
    lines += ["    count_launch()", "    return True"]
    scope = dict(namespace, **consts, kernel=kernel, guard=kernel.guard, dims=dims, count_launch=runtime.count_launch)
    exec(compile("\n".join(lines) + "\n", f"<overdub launch of {kernel.describe()}>", "exec"), scope)
    launch = scope["launch"]
    launch.kernel, launch.guarded = kernel, guarded is not None
    return launch
