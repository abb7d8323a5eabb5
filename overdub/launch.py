"""Launching: ``od.cuda(kernel, *args, ...)`` -- the launch table's lookup (the fast path), then the call.

A launch looks up the launch functions made for (kernel, context, target option, argument classes) in the
runtime's launch table and calls them in turn; the first whose checks pass launches. Where the native
extension is built, that lookup runs in C (``_fastlaunch.c``: ``od.cuda`` is then the C function, with the
signature and documentation of :func:`cuda` below) and native launch functions are called without a Python
frame. When none applies, the launch is a :class:`overdub.call.KernelCall`: its slow path
(:func:`overdub.call.launch_slow`) finds or makes the compiled kernel and a launch function for these argument
classes, caches it when it guards every argument, and launches.

The lookup takes the launch's options as given (``_fastlaunch.OPTIONS``, the keywords it serves), building no
record; the slow path makes them one :class:`overdub.launchconfig.LaunchConfig`. The rarer keywords
(``debug=``, ``device=``) and a launch while ``od.graph`` captures on this thread make the record at once and
go through :func:`launch_configured`, as ``kernel[blocks, threads]`` of ``od.jit`` does with the record it holds.
"""

from __future__ import annotations

import contextlib
import threading
import types as pytypes
from collections.abc import Callable
from typing import Any

from . import world
from .bindings import valid_slot_offset, version_tag_address
from .call import launch_from_table, launch_slow, slow_path
from .context import Context
from .launchconfig import LaunchConfig, LaunchConfigError, named
from .runtime import STATE_MARK, runtime
from .targets import Target, default_target, get_target

try:
    from . import _fastlaunch
except ImportError:  # built without a C compiler: od.cuda is the Python function below
    _fastlaunch = None  # type: ignore[assignment]  # mypy types a module, not "the module or None"

__all__ = ["cuda", "launch_configured", "synchronize", "default_target", "get_target"]

Dims = int | tuple[int] | tuple[int, int] | tuple[int, int, int]
"""A grid or block shape: a positive int, or a tuple of 1-3 of them."""


def cuda(
    kernel: Callable[..., None],
    *args: object,
    blocks: Dims = 1,
    threads: Dims = 1,
    shmem: int = 0,
    stream: object = None,
    target: str | Target | None = None,
    context: Context | tuple[Context, ...] | None = None,
    state: object = None,
    debug: bool | None = None,
    device: int | None = None,
) -> None:
    """Launch ``kernel`` (a plain Python function) over ``blocks`` x ``threads`` in ``context``.

    The kernel and everything it calls are compiled for the argument types in the chain ``context`` -> its
    parents -> the target's base context, once; the compiled kernel is reused until something it consulted
    changes. ``target`` is "cpu" or "cuda"; by default, ``default_target()`` as it was at the first launch
    without one. ``blocks`` and ``threads`` are positive ints or tuples of 1-3 of them; ``shmem`` is the
    dynamic shared memory in bytes (0 to 49152, CUDA's limit per block); ``stream`` a cupy, numba or cuda.core
    stream (default: the legacy default stream). All of them are checked before anything compiles. Any host
    thread may launch, on either target. ``state`` is the value of the device state ``context`` declares (``od.Context(name, state=T)``),
    which ``od.state()`` returns inside the kernel, its callees and the context's overdubs and hooks: data of
    this launch, not a constant of the code. ``debug=True`` launches a checked kernel: out-of-range indices and
    errors raised in the kernel are raised here, naming the thread, the block and the kernel line
    (``OVERDUB_DEBUG=1`` makes that the default). ``device`` launches on that device (its primary context made
    current for the launch; a ``stream`` of another device is a ValueError naming both); by default, on the
    device of ``stream``, else the device current on this thread (cupy's, numba-cuda's, or one a thread made
    current). A kernel compiles for the launch's device's architecture and is loaded once in each context it
    is launched in."""
    try:
        if debug is not None or device is not None or _capturing_here():
            config = LaunchConfig.of(blocks, threads, shmem, stream, device, debug)
            return launch_configured(kernel, args, config, target, context, state)
        # fast path: the launch table
        if not launch_from_table(kernel, args, target, context, state, blocks, threads, shmem, stream):
            launch_slow(kernel, args, blocks=blocks, threads=threads, shmem=shmem, stream=stream, target=target,
                        context=context, state=state)  # fmt: skip
    except LaunchConfigError as error:  # the kernel named: which launch of a program it is
        raise named(error, kernel) from None


def launch_configured(
    kernel: Callable[..., None] | object,
    args: tuple[object, ...],
    config: LaunchConfig,
    target: str | Target | None = None,
    context: Context | tuple[Context, ...] | None = None,
    state: object = None,
) -> None:
    """``od.cuda(kernel, *args, ...)`` with its configuration one checked record: captured while ``od.graph``
    captures on this thread; else launched -- on ``config.device`` (made current around the lookup and the
    slow path) with a checked kernel where ``config.debug`` says so (the target configured for it, which keys
    the launch table)."""
    if _capturing_here():  # od.graph's block: captured, not launched
        _capturing.record(kernel, args, config, target, context, state)
        return
    if config.debug is not None:
        target = get_target(target, debug=config.debug)
    on_device = contextlib.nullcontext() if config.device is None else get_target(target).on_device(
        config.device, stream=config.stream
    )  # fmt: skip
    with on_device:
        if not launch_from_table(kernel, args, target, context, state, *config.options()):
            slow_path(kernel, args, config, target, context, state)


_capturing: Any = None  # the graph (overdub.graphs) capturing this process's launches on its thread
_capture_lock = threading.Lock()


def _capturing_here() -> bool:
    graph = _capturing
    return graph is not None and bool(graph.thread == threading.get_ident())


def capture_into(graph: Any) -> None:
    """Make od.cuda on ``graph.thread`` record its launches with ``graph.record`` (one graph at a time in a
    process: a RuntimeError while another captures); None: launch again."""
    global _capturing
    with _capture_lock:
        if graph is not None and _capturing is not None:
            raise RuntimeError("od.graph: another graph is capturing (one at a time in a process)")
        _capturing = graph
    if _fastlaunch is not None:  # the native od.cuda hands that thread's calls to the definition above
        _fastlaunch.set_capturing(0 if graph is None else graph.thread)


_python_cuda = cuda  # what the native od.cuda calls for the keywords it leaves to Python (debug=)


def install_lookup(slow_path: Callable[..., None] = launch_slow) -> None:
    """Give the native od.cuda its launch table and its slow path (a test may wrap it), which it calls as
    ``slow_path(kernel, args, **options)``, each of ``_fastlaunch.OPTIONS`` by its name. The lookup caches each
    kernel's last key while the table is unchanged (its version tag), and reads each kernel's valid flag in
    its slot."""
    assert _fastlaunch is not None
    _fastlaunch.install(
        runtime.launches,
        slow_path,
        _python_cuda,
        STATE_MARK,
        version_tag_address(runtime.launches),
        world.Node,
        valid_slot_offset(),
    )


if _fastlaunch is not None:  # the same lookup in C; static tools and the API page read the definition above
    install_lookup()
    globals()["cuda"] = _fastlaunch.cuda


class _PythonNamespace(pytypes.ModuleType):
    """A module whose call is od.cuda's launch, where the extension is not built."""

    __call__ = staticmethod(_python_cuda)


Namespace: type = _PythonNamespace if _fastlaunch is None else _fastlaunch.Namespace
"""The base class of ``overdub.cuda``'s module class: its call is the launch (the extension's calls it from C)."""


def configured(
    launch: Callable[..., None],
    kernel: Callable[..., None],
    config: LaunchConfig,
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
) -> Callable[..., None]:
    """``launch`` -- a launch of ``kernel`` with ``config`` on ``target`` in ``context`` (numba-cuda's
    ``kernel[blocks, threads]``) -- fronted where the extension is built by its own: the same lookup with the
    configuration held (its fields read by name, its grid and block parsed once), and ``launch(*args)`` where
    no launch function launches."""
    if _fastlaunch is None:
        return launch
    return _fastlaunch.Configured(launch, kernel, config, target, context)


def synchronize(target: str | None = None, device: int | str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output: the current device's (its context
    current on this thread), ``device``'s (an ordinal), or every device's (``device="all"``)."""
    get_target(target).synchronize(device)
