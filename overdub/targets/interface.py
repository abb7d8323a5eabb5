"""What a target provides to the driver, and what each part of it is for: GPUCompiler's interface.

A target is a class deriving from :class:`Target`, whose required members (no body here) every target must
give, and whose optional hooks have defaults that suit a target running kernels in host memory on one device.
A new back end overrides what differs -- the CPU target overrides few, the CUDA target most.

A kernel's compile is split as GPUCompiler splits it: ``compile_kernel`` makes the target's *code* (machine
code, PTX: nothing of this process's state, what the disk cache stores through ``serialized`` and reads back
through ``deserialized``); ``link`` makes this process's :class:`Launcher` from it (a CUDA kernel's module is
loaded by it, on first launch). Reflection (``od.code_ptx``...) reads the code (``code``), never a launcher.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .options import CompileOptions

if TYPE_CHECKING:
    from numba.core import types as nt
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from ..arguments import Argument
    from ..compiler import Kernel
    from ..context import Context
    from ..roots import TargetRoot

__all__ = ["Target", "Launcher", "LaunchFunction", "GraphCapture"]


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
    """What a target links of a compiled kernel's code in this process."""

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        """The launch function for ``kernel`` and arguments like the ``described`` ones (each an
        :class:`overdub.arguments.Argument`). It guards every argument that has a kind; the caller caches it
        only then."""

    def suggested_block_size(self, shmem: int = 0) -> int:
        """A good number of threads per block for this kernel (``forall``)."""

    def co_resident_blocks(self, threads: int, shmem: int = 0) -> int:
        """How many blocks of ``threads`` threads may run at once: the most a launch that synchronizes its
        whole grid may have."""


class GraphCapture(Protocol):
    """A target's capture of ``od.graph``'s launches into an executable graph (CUDA's stream capture): the
    graph's kernel nodes are found by the compiled function they launch, and patched in place when a kernel
    is recompiled or a launch takes other arguments."""

    @property
    def user_stream(self) -> object:
        """The stream launches are captured on."""

    @property
    def exec(self) -> object:
        """The executable graph, once ended (None: closed, or the capture failed)."""

    @property
    def exec_handle(self) -> int:
        """Its handle, for the native replay."""

    @property
    def launch_entry(self) -> int:
        """The native replay's entry point."""

    @property
    def nodes(self) -> dict[int, list[Any]]:
        """A compiled function's handle -> the kernel nodes launching it."""

    def begin(self) -> None: ...

    def end(self, failed: bool) -> None: ...

    def function_of(self, launcher: Launcher) -> int:
        """The handle of the compiled function ``launcher`` launches on the current device."""

    def parameters(self, launcher: Launcher, arguments: tuple[Argument, ...]) -> tuple[object, Any]:
        """The launch parameters of ``arguments`` as a node takes them: (what keeps them alive, the slots)."""

    def launch(self, launch_functions: tuple[Any, ...], stream: object) -> bool: ...

    def launch_unchecked(self, stream: object) -> None: ...

    def replace_function(self, old: int, new: int) -> None: ...

    def replace_arguments(self, function: int, occurrence: int, slots: Any) -> None: ...

    def close(self) -> None: ...


class Target(Protocol):
    """A compilation target. Members without a body are required; the others are optional hooks."""

    name: str  # what od.cuda(target=...) takes: its registry entry's name
    label: str  # how messages name it
    root: TargetRoot  # the end of every chain: its forwards and replacements
    options: CompileOptions  # how it compiles; another value is another target (``configured``)
    device_memory: bool = False  # is an address a kernel takes (od.pointer, numba's CPointer) device memory?

    # -- required -------------------------------------------------------------------------------------------
    @property
    def base(self) -> Context:
        """Its own context: od.CPU, od.CUDA (its registry entry's)."""

    @property
    def compile_lock(self) -> AbstractContextManager[Any]:
        """Held while compiling for it."""

    @property
    def cache_tag(self) -> str:
        """What its code depends on besides the kernel (GPUCompiler's ``runtime_slug``): the CPU or compute
        capability, options, the compiler's settings."""

    def configured(self, options: CompileOptions) -> Target:
        """This target compiling with ``options`` (itself when they are its own): one object per value."""

    def argument(self, value: object) -> Argument:
        """A launch argument described (:class:`overdub.arguments.Argument`: kind, signature, numba type) as this
        target takes it; raises for values it cannot take (device memory on the CPU, host memory on CUDA)."""

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

    def compile_kernel(self, func: Callable[..., Any], argtypes: tuple[object, ...]) -> Any:
        """Compile a rewritten kernel for ``argtypes``: the target's code of it (what ``link`` links)."""

    def link(self, code: Any) -> Launcher:
        """This process's launcher of ``code`` (as ``compile_kernel`` or ``deserialized`` made it)."""

    # -- optional: typing -----------------------------------------------------------------------------------
    def delegate(
        self, typing_context: TypingContext, callee: object, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
    ) -> tuple[Signature, object] | tuple[None, None]:
        """Type a call of what the compiler implements itself (a builtin, the kernel language's ``cuda.grid``):
        (signature, implementation key), or (None, None) where it has no such call. By default numba's own
        typing (:func:`overdub.bridge.delegate`); a target whose compiler is not numba's answers for it."""
        from .. import bridge

        return bridge.delegate(typing_context, callee, args, kws)

    def inlined_overload(
        self, typing_context: TypingContext, callee: object, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
    ) -> Callable[..., Any] | None:
        """The Python implementation an ``@overload(callee, inline="always")`` gives for these argument types,
        which overdub compiles as a callee, or None (then :meth:`delegate` types the call). By default
        numba's (:func:`overdub.bridge.always_inlined_overload`)."""
        from .. import bridge

        return bridge.always_inlined_overload(typing_context, callee, args, kws)

    # -- optional: recursion ------------------------------------------------------------------------------------
    def self_call_signature(
        self,
        typing_context: TypingContext,
        func: Callable[..., Any],
        typed_args: tuple[Any, ...],
        argtypes: tuple[Any, ...],
    ) -> Signature | None:
        """How a method being compiled (``func``, typed for ``typed_args``) calls itself with ``argtypes``: the
        return type its typing infers so far (numba's rule), or None where it is not being typed here. By
        default numba's typing (:func:`overdub.bridge.self_call_signature`)."""
        from .. import bridge

        return bridge.self_call_signature(typing_context, func, typed_args, argtypes)

    def self_call(self, sig: Signature, state: Any) -> tuple[object, object]:
        """How a method being compiled calls itself with ``sig`` (``state``: the launch state's type, passed
        along first, or None): (implementation key; an object keeping it registered while referenced). By
        default the target compiles no recursion."""
        raise TypeError(f"the {self.label} target compiles no recursive device functions")

    # -- optional: the disk cache ------------------------------------------------------------------------------
    def serialized(self, code: Any) -> object | None:
        """What the disk cache stores of a kernel's code (picklable), or None where it holds something of this
        process and cannot be stored. By default nothing is stored."""
        return None

    def deserialized(self, stored: Any, argtypes: tuple[object, ...]) -> Any | None:
        """The code ``serialized`` stored, in this process; or None -- a miss -- where the entry lacks what
        this process's use needs."""
        return None

    def fork_worker(self) -> Callable[[], None] | None:
        """Asked in a process about to fork ``od.precompile``'s workers, which only compile into the disk cache:
        what a forked worker runs first, or None where a fork cannot compile for this target (then its workers
        are spawned). By default None: compiling may ask a driver, which a forked child cannot use."""
        return None

    # -- optional: reflection ----------------------------------------------------------------------------------
    def code(self, code: Any, kind: str) -> str:
        """A kernel's code as text: ``kind`` is "ptx", "llvm", "asm", "sass", "typed" or "lto_ptx"."""
        raise ValueError(f"the {self.label} target has no {kind} code to show")

    def compile_device_function(self, func: Callable[..., Any], argtypes: tuple[object, ...]) -> Any:
        """``func`` (rewritten in this target's chain) compiled on its own as a device function for ``argtypes``,
        to be read (numba-cuda's ``compile_device``): what :meth:`device_code` reads."""
        raise ValueError(f"the {self.label} target compiles no device function on its own")

    def device_code(self, compiled: Any, kind: str) -> str:
        """The code of kind ``kind`` ("llvm", "ptx") of what :meth:`compile_device_function` compiled."""
        raise ValueError(f"the {self.label} target has no {kind} code of a device function to show")

    def for_reflection(self, cc: tuple[int | str, ...] | None, device: int | None) -> Target:
        """This target as ``od.code_*`` compiles for: for compute capability ``cc``, else for ``device``'s."""
        if cc is not None or device is not None:
            raise TypeError(f"the {self.label} target compiles for one architecture: it takes no cc= or device=")
        return self

    def reflecting(self) -> AbstractContextManager[None]:
        """Held while a reflection compiles: its code is read, not launched."""
        return contextlib.nullcontext()

    # -- optional: launches, devices, memory ---------------------------------------------------------------
    def typeof(self, value: object) -> Any:
        """The numba type of a launch argument on this target: ``argument(value).type``."""
        return self.argument(value).type

    def synchronize(self, device: int | str | None = None) -> None:
        """Wait for launched work to finish and flush device printf output: on ``device`` (None: the
        current one; ``"all"``: every one). By default launches finish before they return."""
        return None

    def compile_host(self, func: Callable[..., Any], argtypes: tuple[Any, ...]) -> Callable[..., Any]:
        """A Python-callable compile of ``func`` (rewritten in a chain) for these argument types (``od.overdub``)."""
        raise TypeError(f"od.overdub runs on the host: its calls compile for the CPU target, not target={self.name!r}")

    @contextlib.contextmanager
    def on_device(self, device: int | None, what: str = "od.cuda", stream: object = None) -> Iterator[None]:
        """A context manager making ``device`` the current one on this thread for its block (a clear
        ValueError for a device this machine does not have, or a ``stream`` of another device); ``device``
        None: the current device, or the device of ``stream`` where it is another's -- a launch on a stream
        runs on the stream's device. By default the target has one device, 0, where every stream is."""
        if device is not None and (device != 0 or isinstance(device, bool)):
            raise ValueError(f"{what}(device={device!r}): the {self.name.upper()} target has one device, 0")
        yield

    def for_current_device(self) -> Target:
        """This target as a launch from this thread compiles for it: itself, or (CUDA) the same options for the
        architecture of the device current here -- a launch loads code for its device."""
        return self

    def check_launchable(self, stream: object = None) -> None:
        """Raise a clear error where launching on this target (on ``stream``) is impossible here (no GPU, no
        driver, a stream of another context than the current one). By default it always is possible."""
        return None

    def graph_capture(self) -> GraphCapture | None:
        """A capture of ``od.graph``'s launches into the target's executable graph; None (the default): the
        graph keeps its launches and replays them one by one."""
        return None

    def empty(self, shape: Any, dtype: Any) -> Any:
        """An uninitialised array in this target's memory (numpy's by default)."""
        return np.empty(shape, dtype=dtype)

    def zeros(self, shape: Any, dtype: Any) -> Any:
        """A zeroed array in this target's memory (numpy's by default)."""
        return np.zeros(shape, dtype=dtype)

    def host_copies(self, args: tuple[object, ...], stream: object) -> tuple[tuple[object, ...], Callable[[], None]]:
        """numba-cuda's launch of host arrays (``kernel[b, t](host_array)``): the arguments with host arrays
        copied to this target's memory, and what copies them back after the launch. By default the target
        takes host memory: the arguments as they are, nothing to copy back."""
        return args, _nothing


def _nothing() -> None:
    pass
