"""The registry of targets: each target's name, its own context, where its package is, what memory it holds.

Everything outside ``targets/`` knows targets only through this registry: a context of every target
(``od.CPU``, ``od.CUDA``) is made here when its entry is registered, ``od.ALL`` is every registered target's
context at the time of each call, ``od.cuda(..., target=name)`` finds the package by the entry, and a value's
memory names the target that takes it (``od.map_blocks`` of cupy chunks runs on CUDA). An entry is cheap: the
package -- and what it imports (numba-cuda) -- is imported when the target is first asked for. Adding a target
is one package under ``targets/`` whose module-level ``current_target()`` gives the target for the calling
thread's device, plus one :func:`register` line below.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from ..context import BaseContext
from ..registry import Reference, reference_to
from ..runtime import runtime
from ..types import Any

if TYPE_CHECKING:
    from . import Target

__all__ = [
    "HOST",
    "DEVICE",
    "TargetEntry",
    "register",
    "entry",
    "entries",
    "names",
    "holding",
    "EveryTarget",
    "ALL",
    "CPU",
    "CUDA",
]

_F = TypeVar("_F", bound="Callable[..., object]")


class TargetEntry(NamedTuple):
    """One registered target."""

    name: str
    """What ``od.cuda(..., target=...)`` and ``OVERDUB_TARGET`` take."""
    base: BaseContext
    """Its own context, the last asked before the callee itself (``od.CPU``): libraries extend it."""
    package: str
    """The package owning the target; its ``current_target()`` is the target for this thread's device."""
    holds: Callable[[object], bool]
    """Does a value (an array, a chunk) live in this target's memory?"""
    host_api: str | None = None
    """The module of its stand-ins for numba-cuda's host API (its ``STAND_INS``), where it has its own."""

    def target(self) -> Target:
        """The target for the calling thread's device, its package imported on first use."""
        current: Callable[[], Target] = importlib.import_module(self.package).current_target
        return current()

    def stand_ins(self, namespace: str) -> dict[str, object] | None:
        """What ``from overdub import cuda`` gives for the names of numba-cuda's host API ``namespace``
        ("numba.cuda", "numba.cuda.random") where this target runs launches; None: numba-cuda's own. (The
        stand-ins launch kernels: their module sits above the launch, so it is imported by name.)"""
        if self.host_api is None:
            return None
        stand_ins: dict[str, dict[str, object]] = importlib.import_module(self.host_api).STAND_INS
        return stand_ins.get(namespace)


_entries: dict[str, TargetEntry] = {}
runtime.register_cache(f"{__name__}._entries", _entries, kept="the registered targets: definitions")


def register(
    name: str,
    context: str | BaseContext,
    package: str,
    holds: Callable[[object], bool],
    host_api: str | None = None,
) -> BaseContext:
    """Register the target ``name`` owned by ``package``; returns its own context, named ``context``: bind it
    to a module-level name of that name in the calling module, where it pickles by reference. A target that is
    another's with another compiler (cuda-mlir) shares that one's context: ``context`` is the context itself."""
    if name in _entries:
        raise ValueError(f"a target named {name!r} is registered already (by {_entries[name].package})")
    if isinstance(context, BaseContext):
        base = context
    else:
        base = BaseContext(context)
        base.__module__ = sys._getframe(1).f_globals["__name__"]  # the caller's module, which binds it
    _entries[name] = TargetEntry(name, base, package, holds, host_api)
    return base


def entry(name: str) -> TargetEntry:
    """The entry of the target ``name``; a ValueError naming the registered ones for another name."""
    found = _entries.get(name)
    if found is None:
        raise ValueError(f"unknown target {name!r}: use {names()}")
    return found


def entries() -> tuple[TargetEntry, ...]:
    return tuple(_entries.values())


def names() -> str:
    """The registered targets' names as a message lists them: ``'cpu', 'cuda' or 'cuda-mlir'``."""
    quoted = [repr(name) for name in _entries]
    return " or ".join(quoted) if len(quoted) < 3 else ", ".join(quoted[:-1]) + f" or {quoted[-1]}"


def holding(value: object) -> TargetEntry:
    """The target whose memory holds ``value``: the latest registered that says so (a device's memory before
    the host's, which holds whatever no other target claims)."""
    for candidate in reversed(_entries.values()):  # later targets are the more specific (device memory)
        if candidate.holds(value):
            return candidate
    raise ValueError(f"no target holds a {type(value).__name__}")


def _in_host_memory(value: object) -> bool:
    return True  # whatever no device target claims


def _in_cuda_memory(value: object) -> bool:
    return hasattr(value, "__cuda_array_interface__")


HOST = "cpu"
"""The target running code on this machine's host, in host memory: ``od.overdub``'s, ``od.code_native``'s."""
DEVICE = "cuda"
"""The target device code compiles for by default where no target is named (``od.code_ptx``)."""

CPU = register("cpu", "CPU", "overdub.targets.cpu", _in_host_memory, "overdub.targets.cpu.hostapi")
CUDA = register("cuda", "CUDA", "overdub.targets.cuda", _in_cuda_memory)
# numba-cuda-mlir compiling for the CUDA target's devices and memory (which stays the CUDA target's: holding
# answers "cuda" for device memory); installed with the ``mlir`` extra
register("cuda-mlir", CUDA, "overdub.targets.cudamlir", lambda value: False)


class EveryTarget:
    """``od.ALL``: every target's own context at once, for a library extending all targets in one call --
    ``@od.ALL.overdub(f)``, ``@od.ALL.prehook(f)``, ``od.ALL.forward(f, g)`` do to each registered target's
    context (``od.CPU``, ``od.CUDA``) what each would do alone (and ``od.CPU`` or ``od.CUDA`` where one target
    needs its own)."""

    @property
    def contexts(self) -> tuple[BaseContext, ...]:
        return tuple({id(registered.base): registered.base for registered in _entries.values()}.values())

    def __reduce__(self) -> Reference:
        return reference_to(self, __name__, "ALL")

    def _each(self, decorator: str, callee: object) -> Callable[[_F], _F]:
        def define(func: _F) -> _F:
            for ctx in self.contexts:
                getattr(ctx, decorator)(callee)(func)
            return func

        return define

    def overdub(self, callee: Callable[..., object]) -> Callable[[_F], _F]:
        """Decorator: the def as an overdub of ``callee`` in every target's context."""
        return self._each("overdub", callee)

    def prehook(self, callee: object) -> Callable[[_F], _F]:
        """Decorator: the def as a prehook of ``callee`` in every target's context."""
        return self._each("prehook", callee)

    def posthook(self, callee: object) -> Callable[[_F], _F]:
        """Decorator: the def as a posthook of ``callee`` in every target's context."""
        return self._each("posthook", callee)

    def forward(self, callee: object, to: object) -> None:
        """Calls of ``callee`` mean calls of ``to`` on every target (where no overdub takes them)."""
        for ctx in self.contexts:
            ctx.forward(callee, to)

    def disablehooks(self, callee: object = Any) -> None:
        """Every target's context's hooks off (for every call, or for ``callee``): ``Context.disablehooks``."""
        for ctx in self.contexts:
            ctx.disablehooks(callee)

    def enablehooks(self, callee: object = Any) -> None:
        """Every target's context's hooks on again: ``Context.enablehooks``."""
        for ctx in self.contexts:
            ctx.enablehooks(callee)

    def __repr__(self) -> str:
        return f"od.ALL ({' and '.join(f'od.{ctx.name}' for ctx in self.contexts)})"


ALL = EveryTarget()
