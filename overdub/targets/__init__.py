"""Compilation targets: what a backend provides to the driver, and nothing else.

The interface is written down as :class:`Target` and :class:`Launcher` (GPUCompiler's
``AbstractCompilerTarget``, as ``typing.Protocol`` s): a third backend is one new module implementing them, not
a tour of the code. The driver (:mod:`overdub.compiler`) calls ``compile_method`` while numba types a caller
and ``compile_kernel`` for a kernel; the launch path (:mod:`overdub.launch`) asks the kernel's launcher for a
launch function and caches it.

A target's ``name`` is what users pass (``od.cuda(..., target="cuda")``); ``label`` is how messages name it
(``"cuda (sm_90)"``). The CUDA target's module imports numba-cuda, which takes longer to import than numba
itself: it is imported when the CUDA target is first asked for, and whether a GPU is usable is answered
without it where no NVIDIA driver is (:mod:`.gpu`).

Both targets compile with numba-cuda's typing and stubs (``cuda.grid``, ``cuda.atomic``...), which numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) replaces with Python that runs kernels itself: under it importing the
targets raises one ImportError saying so, and that the CPU target is what runs kernels without a GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from numba import config as numba_config
from numba.core import types as nt

# numba sets its configuration's attributes at run time (config.reload_config), where mypy does not see them
if numba_config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
    raise ImportError(
        "overdub does not run under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): the simulator replaces "
        "numba.cuda, which overdub compiles kernels with. Unset NUMBA_ENABLE_CUDASIM; overdub's CPU target runs "
        "kernels without a GPU (od.cuda(kernel, ..., target='cpu'), or OVERDUB_TARGET=cpu)."
    )

from .. import settings
from ..runtime import runtime
from . import cpu
from .gpu import gpu_usable
from .options import CompileOptions, debug_default

if TYPE_CHECKING:
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from ..arguments import Argument
    from ..compiler import Kernel
    from ..context import Context, TargetRoot

__all__ = ["Target", "Launcher", "LaunchFunction", "CompileOptions", "get_target", "default_target", "gpu_usable"]


class LaunchFunction(Protocol):
    """Launches one compiled kernel with arguments of fixed classes: checks the kernel is still valid and the
    arguments still have the types it was compiled for, marshals them, enqueues. Returns False, launching
    nothing, when a check fails (the caller then takes the slow path)."""

    @property
    def kernel(self) -> Kernel:
        """The compiled kernel it launches."""

    @property
    def guarded(self) -> bool:
        """Does it check every argument's class? Only then may the launch table keep it."""

    def __call__(
        self, args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object, /
    ) -> bool: ...


class Launcher(Protocol):
    """What a target makes of a compiled kernel."""

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        """The launch function for ``kernel`` and arguments like the ``described`` ones (each an
        :class:`overdub.arguments.Argument`). It guards every argument that has a kind; the caller caches it
        only then."""

    def suggested_block_size(self, shmem: int = 0) -> int:
        """A good number of threads per block for this kernel (``forall``)."""


class Target(Protocol):
    """A compilation target."""

    name: str  # "cpu", "cuda": what od.cuda(target=...) takes
    label: str  # how messages name it
    root: TargetRoot  # the end of every chain: its forwards and replacements
    options: CompileOptions  # how it compiles; another value is another target (``configured``)

    @property
    def base(self) -> Context:
        """Its base context: od.CPU, od.CUDA."""

    @property
    def compile_lock(self) -> AbstractContextManager[Any]:
        """Held while compiling for it."""

    @property
    def cache_tag(self) -> str:
        """What its code depends on besides the kernel: CPU or compute capability, options."""

    def configured(self, options: CompileOptions) -> Target:
        """This target compiling with ``options`` (itself when they are its own): one object per value."""

    def argument(self, value: object) -> Argument:
        """A launch argument described (:class:`overdub.arguments.Argument`: kind, signature, numba type) as this
        target takes it; raises for values it cannot take (device memory on the CPU, host memory on CUDA)."""

    def typeof(self, value: object) -> Any:
        """The numba type of a launch argument on this target: ``argument(value).type``."""

    def compile_method(
        self,
        func: Callable[..., Any],
        typing_context: TypingContext,
        argtypes: tuple[nt.Type, ...],
        kwtypes: dict[str, nt.Type],
    ) -> tuple[Signature, object, object]:
        """Compile a rewritten callee while its caller is typed: (signature, implementation key for numba's
        lowering, an object that keeps the code alive -- and registered -- while referenced)."""

    def call_with_state(self, sig: Signature, impl_key: object) -> tuple[Signature, object, object]:
        """How callers call a method compiled (``compile_method``) with a launch's state as its first
        parameter: (their signature, without the state; implementation key; an object keeping the
        implementation registered while referenced). Each call passes the caller's own state along."""

    def compile_kernel(self, func: Callable[..., Any], argtypes: tuple[object, ...]) -> Launcher:
        """Compile a rewritten kernel for ``argtypes``."""

    def launcher_payload(self, launcher: Launcher) -> Any:
        """What the disk cache stores of a compiled kernel (picklable: machine code, PTX, cubin), or None
        where it holds something of this process and cannot be stored."""

    def launcher_from_payload(self, payload: Any, argtypes: tuple[object, ...]) -> Launcher | None:
        """The launcher of a kernel loaded from the disk cache (``payload`` as ``launcher_payload`` made it),
        or None -- a miss -- where the entry lacks code this process's use needs."""

    def synchronize(self, device: int | str | None = None) -> None:
        """Wait for launched work to finish and flush device printf output: on ``device`` (None: the
        current one; ``"all"``: every one)."""

    def compile_host(self, func: Callable[..., Any], argtypes: tuple[Any, ...]) -> Callable[..., Any]:
        """A Python-callable compile of ``func`` (rewritten in a chain) for these argument types (``od.overdub``)."""

    def on_device(
        self, device: int | None, what: str = "od.cuda", stream: object = None
    ) -> AbstractContextManager[None]:
        """A context manager making ``device`` the current one on this thread for its block (a clear
        ValueError for a device this machine does not have, or a ``stream`` of another device); ``device``
        None: the current device, or the device of ``stream`` where it is another's -- a launch on a stream
        runs on the stream's device."""

    def for_current_device(self) -> Target:
        """This target as a launch from this thread compiles for it: itself, or (CUDA) the same options for the
        architecture of the device current here -- a launch loads code for its device."""

    def check_launchable(self, stream: object = None) -> None:
        """Raise a clear error where launching on this target (on ``stream``) is impossible here (no GPU, no
        driver, a stream of another context than the current one)."""


def default_target() -> str:
    """``$OVERDUB_TARGET`` if set, else "cuda" when a GPU is usable, else "cpu"."""
    return settings.TARGET.value() or ("cuda" if gpu_usable() else "cpu")


def _cuda_target() -> Target:
    """The CUDA target of the architecture of the device current on the calling thread (asked at each slow-path
    launch and reflection: one process may drive GPUs of several architectures); the module, and numba-cuda
    with it, imported on first use."""
    from . import cuda

    return cuda.target_for(cuda.device_cc())


_TARGETS: dict[str, Callable[[], Target]] = {"cpu": lambda: cpu.TARGET, "cuda": _cuda_target}


def get_target(name: str | Target | None = None, debug: bool | None = None) -> Target:
    """The target called ``name`` (or ``name`` itself, a target object); None means :func:`default_target` as it
    was when first asked, so that launches and ``synchronize`` agree on it. ``debug`` configures it for checked
    kernels; by default ``OVERDUB_DEBUG`` decides, as it was when first asked."""
    if name is None:
        name = _default()
    if isinstance(name, str):
        try:
            target = _TARGETS[name]()
        except KeyError:
            raise ValueError(f"unknown target {name!r}: use 'cpu' or 'cuda'") from None
    elif isinstance(getattr(name, "options", None), CompileOptions):
        target = name.for_current_device()
    else:
        raise TypeError(f"target= takes 'cpu' or 'cuda', not {name!r}")
    if debug is None:
        debug = target.options.debug or debug_default()
    return target.configured(target.options.replaced(debug=bool(debug)))


@functools.cache
def _default() -> str:
    return default_target()


runtime.register_cache(f"{__name__}._default", _default, kept="fixed at first use: launches and synchronize agree")
