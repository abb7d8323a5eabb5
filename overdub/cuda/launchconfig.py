"""``overdub.cuda.launchconfig``: numba-cuda's ``numba.cuda.launchconfig`` for ``od.jit`` kernels -- the
configuration of the launch whose compile is running, which code that compiles with it reads (a numba-cuda
rewrite pass, as cuda.coop's are: its block size decides the code).

While an ``od.jit`` kernel's launch compiles it, :func:`current_launch_config` is that launch's configuration
(the kernel as ``dispatcher``, the arguments, ``griddim``, ``blockdim``, ``stream``, ``sharedmem``), on the
launching thread only; elsewhere None, or numba-cuda's own for a launch of a numba-cuda dispatcher. A compile
that calls ``config.dispatcher.mark_launch_config_sensitive()`` makes the kernel compile again for each launch
configuration it meets (:meth:`overdub.dropin.Kernel.mark_launch_config_sensitive`), and is never written to the
disk cache. ``kernel._compile_for_args`` is what a launch calls to compile, as numba-cuda's dispatcher does;
programs wrap it (:func:`capture_compile_config`).
"""

from __future__ import annotations

from ..launchconfig import (
    LaunchConfiguration,
    capture_compile_config,
    current_launch_config,
    ensure_current_launch_config,
)

__all__ = ["current_launch_config", "ensure_current_launch_config", "capture_compile_config", "LaunchConfiguration"]
