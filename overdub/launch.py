"""Launching: ``od.cuda(kernel, *args, ...)`` -- lookup, compile, cache.

A launch looks up the launch functions made for (kernel, context, target option, argument classes) in the
runtime's launch table and calls them in turn; the first whose checks pass launches. Where the native
extension is built, that lookup runs in C (``_fastlaunch.c``: ``cuda`` below is then the C function) and
native launch functions are called without a Python frame. When none applies, the slow path types the
arguments, gets the compiled kernel (compiling if needed), asks the kernel's launcher for a launch function
(:class:`overdub.targets.Launcher`), caches it when it guards every argument, and launches.
"""
from __future__ import annotations

from . import compiler
from .context import Context
from .runtime import launch_key, runtime
from .targets import default_target, get_target

__all__ = ["cuda", "synchronize", "default_target", "get_target"]


def _cuda(kernel, *args, threads=1, blocks=1, shmem: int = 0, stream=None, target: str | None = None,
          context: Context | None = None):
    """od.cuda where the native extension is not built (its documentation: ``help(od.cuda)`` there, or
    docs/index.md): the launch functions for these argument classes, else the slow path."""
    for launch in runtime.launches.get(launch_key(kernel, context, target, args), ()):
        if launch(args, blocks, threads, shmem, stream):
            return
    _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context)


def _launch_slow(kernel, args, threads, blocks, shmem, stream, target, context):
    """A launch whose lookup missed or whose launch functions' checks failed: type the arguments, get the
    compiled kernel (compiling if needed), add a launch function for these argument classes, launch.

    A redefinition on another thread may invalidate the kernel between its compile and its launch; then the
    kernel is compiled again, as many times as that happens: a launch always runs a valid kernel."""
    runtime.collect()
    tgt = get_target(target)
    argtypes = tuple(map(tgt.typeof, args))
    job = compiler.CompileJob.of(kernel, argtypes, (context or tgt.base).chain(tgt))
    key = launch_key(kernel, context, target, args)
    while True:
        compiled = compiler.cached_kernel(job)
        launch = compiled.launcher.launch_function(compiled, args, argtypes)
        if launch(args, blocks, threads, shmem, stream):
            if launch.guarded:
                runtime.add_launch(key, launch)
            return
        if compiled.usable():
            raise RuntimeError(f"overdub internal error: the launch function of {job.call()} rejected the "
                               f"arguments it was made for")


try:     # the same lookup in C, where the native extension is built (see _fastlaunch.c)
    from ._fastlaunch import cuda, install as _install_native
except ImportError:
    cuda = _cuda
else:
    _install_native(runtime.launches, _launch_slow)


def synchronize(target: str | None = None) -> None:
    """Wait for launched work to finish and flush device printf output."""
    get_target(target).synchronize()
