"""Generated launch functions: the steps every target's Python launch path shares, in one place.

A launch function is generated per compiled kernel and argument classes, so that a launch runs straight-line
code: unpack the arguments, check the kernel is still valid (a flag, and one version tag per module it read),
check the argument guards of :mod:`overdub.arguments`, read the grid, the dynamic shared memory and the stream,
then the target's own statements (``body``: marshal and enqueue), and count the launch. The body sees the
arguments as ``a0, a1, ...``, the grid as ``gx, gy, gz`` and ``tx, ty, tz``, and ``shmem`` and ``stream``.

A launch function takes the launch's configuration as raw values -- the fast path builds no record -- and
checks them with a few comparisons, falling back on :mod:`overdub.launchconfig`'s checks (:func:`dims`,
:func:`shmem_bytes`, :func:`stream_handle`), the ones :class:`overdub.launchconfig.LaunchConfig` is made with
before anything is compiled: one message for a bad configuration, on every target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import arguments
from ..bindings import words_fresh
from ..launchconfig import (
    MAX_GRID,
    MAX_SHMEM,
    MAX_THREADS_PER_BLOCK,
    LaunchConfigError,
    dims,
    named,
    shmem_bytes,
    stream_handle,
)
from ..runtime import runtime

if TYPE_CHECKING:
    from ..arguments import Argument
    from ..compiler import Kernel
    from . import LaunchFunction


# the kernel's guard's fast check (Guard.fresh), inlined: its words compared in C where the extension is built
FRESH = "guard.fresh()" if words_fresh is None else "words_fresh(guard.words)"


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
        f"    if not (kernel.valid and {FRESH}) and not kernel.usable():",
        "        return False",
    ]
    if conditions:
        lines += [f"    if not ({' and '.join(conditions)}):", "        return False"]
    lines += [  # (a bad configuration names the kernel: named)
        "    try:",
        f"        gx, gy, gz = (blocks, 1, 1) if type(blocks) is int and 0 < blocks <= {MAX_GRID[0]} else "
        "dims(blocks, 'blocks')",
        f"        tx, ty, tz = (threads, 1, 1) if type(threads) is int and 0 < threads <= {MAX_THREADS_PER_BLOCK} "
        "else dims(threads, 'threads')",
        f"        if type(shmem) is not int or not 0 <= shmem <= {MAX_SHMEM}:",
        "            shmem = shmem_bytes(shmem)",
        "    except LaunchConfigError as error:",
        "        raise named(error, kernel.job.func) from None",
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
        words_fresh=words_fresh,
        dims=dims,
        shmem_bytes=shmem_bytes,
        LaunchConfigError=LaunchConfigError,
        named=named,
        stream_handle=stream_handle,
        count_launch=runtime.count_launch,
    )
    exec(compile("\n".join(lines) + "\n", f"<overdub launch of {kernel.describe()}>", "exec"), scope)
    launch = scope["launch"]
    launch.kernel, launch.guarded = kernel, guarded is not None
    function: LaunchFunction = launch  # the def just made, with the attributes the protocol reads
    return function
