"""Launching: ``od.cuda(kernel, *args, ...)`` -- lookup, compile, cache.

A launch looks up the launch functions made for (kernel, context, target option, argument classes) in the
runtime's launch table and calls them in turn; the first whose checks pass launches. Where the native
extension is built, that lookup runs in C (``_fastlaunch.c``: ``cuda`` below is then the C function) and
native launch functions are called without a Python frame. When none applies, the slow path types the
arguments, gets the compiled kernel (compiling if needed), asks the kernel's launcher for a launch function
(:class:`overdub.targets.Launcher`), caches it when it guards every argument, and launches.
"""

from __future__ import annotations

import dis
import functools
import inspect
import os
import types as pytypes

from . import bridge, closures
from .context import Context
from .registry import GenericFunction
from .runtime import STATE_MARK, launch_key, runtime
from .targets import default_target, get_target

__all__ = ["cuda", "synchronize", "default_target", "get_target"]


def _cuda(
    kernel,
    *args,
    threads=1,
    blocks=1,
    shmem: int = 0,
    stream=None,
    target: str | None = None,
    context: Context | None = None,
    state=None,
    debug: bool | None = None,
):
    """od.cuda in Python: where the native extension is not built, and for the keywords it leaves to Python
    (its documentation: ``help(od.cuda)`` there, or docs/index.md). The launch functions for these argument
    classes, else the slow path. ``debug`` picks the target configured for checked kernels (or not)."""
    if debug is not None:
        target = get_target(target, debug=bool(debug))
    launched = args if state is None else (state, *args)
    for launch in runtime.launches.get(launch_key(kernel, context, target, args, state), ()):
        if launch(launched, blocks, threads, shmem, stream):
            return
    _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context, state)


def _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context, state=None):
    """A launch whose lookup missed or whose launch functions' checks failed: type the arguments, get the
    compiled kernel (compiling if needed), add a launch function for these argument classes, launch.

    A launch passing state passes it as the kernel's hidden first argument: its launch functions take
    ``(state, *args)``.

    A redefinition on another thread may invalidate the kernel between its compile and its launch; then the
    kernel is compiled again, as many times as that happens: a launch always runs a valid kernel."""
    runtime.collect()
    function = bridge.python_function(kernel)  # a def, or the function of a numba or od.jit kernel
    check_kernel(function or kernel, args)
    tgt = get_target(target)
    tgt.check_launchable()
    ctx = context or tgt.base
    hidden = () if state is None else (state,)
    chain = ctx.chain(tgt, ctx.launch_state_type(state, tgt.typeof))
    key = launch_key(kernel, context, target, args, state)
    while True:
        compiled, launched_args, argtypes, lifted = closures.compiled_kernel(function, args, tgt.typeof, chain, hidden)
        launch = compiled.launcher.launch_function(compiled, launched_args, argtypes)
        if lifted is not None:
            launch = closures.with_captured_values(launch, lifted, function, launched_args, len(hidden))
        if launch(hidden + args, blocks, threads, shmem, stream):
            if launch.guarded:
                runtime.add_launch(key, launch)
            return
        if lifted is None and compiled.usable():  # (a captured value may have changed meanwhile)
            raise RuntimeError(
                f"overdub internal error: the launch function of {compiled.job.call()} rejected "
                f"the arguments it was made for"
            )


def check_kernel(kernel, args: tuple) -> None:
    """Refuse, before anything is compiled, what cannot be a kernel launch: a kernel that is not a plain
    Python function, arguments that do not bind to its parameters, a kernel that returns a value."""
    if not isinstance(kernel, pytypes.FunctionType):
        raise TypeError(
            f"od.cuda launches a kernel written as a Python function (a def, or a numba cuda.jit "
            f"kernel), not {_what(kernel)}" + _KERNEL_HINTS.get(type(kernel), "")
        )
    signature = inspect.signature(kernel)
    unsupported = [
        p.name for p in signature.parameters.values() if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if unsupported:
        raise TypeError(
            f"kernel {kernel.__qualname__}{signature}: kernels take positional parameters only, not "
            f"{', '.join(unsupported)} (*args, **kwargs and keyword-only parameters)"
        )
    try:
        signature.bind(*args)
    except TypeError as exc:
        raise TypeError(
            f"kernel {kernel.__qualname__}{signature} cannot take the {len(args)} "
            f"argument{'s' if len(args) != 1 else ''} given after it: {exc}"
        ) from None
    if returns_value(kernel.__code__):
        raise TypeError(
            f"kernel {kernel.__qualname__} ({_where(kernel)}) returns a value; kernels return "
            f"nothing -- store results in an array argument"
        )


def returns_value(code) -> bool:
    """Does ``code`` return anything but None? (Read off the bytecode: each return's value.)"""
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opname == "RETURN_CONST" and instruction.argval is not None:
            return True
        if instruction.opname == "RETURN_VALUE":
            before = instructions[i - 1]
            if not (before.opname == "LOAD_CONST" and before.argval is None):
                return True
    return False


def _what(value) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    return f"a {type(value).__name__} ({value!r:.60})"


def _where(func) -> str:
    return f"{os.path.basename(func.__code__.co_filename)}:{func.__code__.co_firstlineno}"


_KERNEL_HINTS = {
    GenericFunction: ": a generic function is a device function; launch a def that calls it",
    functools.partial: ": write a kernel def that calls the function with the bound arguments",
}


try:  # the same lookup in C, where the native extension is built (see _fastlaunch.c)
    from ._fastlaunch import cuda, install as _install_native
except ImportError:
    cuda = _cuda
else:
    _install_native(runtime.launches, _launch_slow, _cuda, STATE_MARK)


def synchronize(target: str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output."""
    get_target(target).synchronize()
