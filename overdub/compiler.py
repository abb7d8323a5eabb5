"""The kernel cache: a launch's kernel found in this process, else loaded from the disk cache, else compiled.

A kernel (:class:`Kernel`) is a job (:class:`~overdub.job.CompileJob`) compiled by its target: the def
rewritten in the chain, typed by numba -- where dispatch happens (:mod:`overdub.resolve`), each callee a
method instance (:mod:`overdub.instances`) -- and the launcher the target made of it. It is an
:mod:`overdub.world` node, checked by a flag plus the per-namespace version check of :mod:`overdub.bindings`;
the runtime's kernel cache holds it by job while valid. The lookup reads as tiers (the launch table before
them is :mod:`overdub.call`'s): a valid kernel of this process; under the compile lock, the disk cache's
entry, its facts re-checked here; else a compile, stored to the disk cache. :func:`explain` lists the edges a
cached kernel's validity depends on.
"""

from __future__ import annotations

import collections
import logging
import time
import types as pytypes
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from . import bridge, settings, world
from . import resolve as _resolve  # noqa: F401  (it registers the numba type of Overdubbed callees: typing calls it)
from .bindings import Guarded
from .job import CompileJob, also_numba_error, chain_name, compile_error, consult_chain
from .registry import MethodError
from .rewrite import rewrite, state_type
from .runtime import runtime

if TYPE_CHECKING:
    from .diagnosis import Diagnosis

# The disk cache (its facts, fingerprints, locators) and the diagnosis of a failure are imported where a
# kernel is first loaded or compiled, or a compile first fails: ``import overdub`` leaves them out.

_T = TypeVar("_T")

log = logging.getLogger("overdub")

__all__ = [
    "Kernel",
    "cached_kernel",
    "compiled_afresh",
    "configuration_bound",
    "CONFIGURATION_BOUND",
    "loaded_kernel",
    "build",
    "explain",
    "stats",
    "reset",
    "compile_ms",
]

stats = runtime.stats
reset = runtime.reset


class Kernel(Guarded):
    """A compiled kernel: its code and this process's launcher of it, valid while every edge it consulted
    holds."""

    __slots__ = ("job", "code", "launcher", "launch_keys", "made")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        # which kernel of this process it is: an od.jit kernel's overloads are those made since it was
        self.made = _made["count"] = _made.get("count", 0) + 1
        # the target's code (what the disk cache stores) and the Launcher it links of it (overdub.targets, above
        # this module), set once built or loaded, before the kernel is cached
        self.code: object = None
        self.launcher: object = None
        # where the runtime's launch table holds launch functions for it
        self.launch_keys: set[tuple[object, ...]] = set()

    def on_invalidate(self, cause: str) -> None:
        runtime.kernels.discard(self.job, self, reason=cause)
        runtime.drop_launches(self)

    def describe(self) -> str:
        return f"kernel {self.job.call()} in {chain_name(self.job.chain)}"


_made: dict[str, int] = {}  # "count": the kernels this process made (Kernel.made)
runtime.register_cache(f"{__name__}._made", _made, kept="the numbering of this process's kernels")


def kernels_made() -> int:
    """How many kernels this process has made (the last one's :attr:`Kernel.made`)."""
    return _made.get("count", 0)


def cached_kernel(job: CompileJob) -> Kernel:
    """The compiled kernel of ``job`` (the tiers after the launch table, :mod:`overdub.call`)."""
    return cast(Kernel, _kernel_of(job, compile=True))


def loaded_kernel(job: CompileJob) -> Kernel | None:
    """``job``'s kernel from the tiers before a compile -- this process's, else the disk cache's -- or None
    where neither has it; nothing is compiled (``od.precompile`` asks this before it compiles elsewhere)."""
    return _kernel_of(job, compile=False)


def _kernel_of(job: CompileJob, compile: bool) -> Kernel | None:
    """The lookup's tiers after the launch table; on a miss of both, a compile where ``compile``, else None."""
    # somewhat fast path: compiled in this process and still valid
    kernel = cast("Kernel | None", runtime.kernels.get(job))  # the runtime's kernel cache holds these
    if kernel is not None and kernel.usable() and not configuration_bound(kernel):
        return kernel
    # slow path: under the compile lock, the disk cache, else a compile
    target = job.target
    with target.compile_lock, world.lock:
        runtime.collect()
        current = cast("Kernel | None", runtime.kernels.get(job))
        if current is not None and current is not kernel and current.usable() and not configuration_bound(current):
            return current  # another thread compiled it meanwhile
        reason = _reason(job, kernel)
        loaded = None if bridge.dumps_requested() else _loaded_kernel(job)  # a dump is of a compile
        if loaded is None and not compile:
            return None
        built = loaded or _built_kernel(job)
        runtime.kernels.put(job, built)
        verb = "loaded from the disk cache" if loaded is not None else "compiled"
        log.info("%s %s for %s: %s", verb, job.call(), target.label, reason)
        return built


def compiled_afresh(job: CompileJob, since: int | None) -> Kernel:
    """``job``'s kernel compiled now unless one made after ``since`` (:func:`kernels_made`) is valid, whatever
    else memory or the disk cache holds (an ``od.jit`` kernel made while numba's dumps are asked for compiles
    its own code, as each numba-cuda dispatcher does, so they print). ``since`` None: an ``od.jit`` kernel's
    own code for the launch configuration compiling now (:mod:`overdub.cuda.launchconfig`), which no other
    launch finds."""
    with job.target.compile_lock, world.lock:
        runtime.collect()
        current = cast("Kernel | None", runtime.kernels.get(job))
        if since is not None and current is not None and current.made > since and current.usable():
            return current
        built = _built_kernel(job, store=since is not None)
        if since is not None:
            runtime.kernels.put(job, built)
        log.info("compiled %s for %s: %s", job.call(), job.target.label, _AFRESH[since is None])
        return built


_AFRESH = ("numba's dumps asked for", "its launch configuration")


CONFIGURATION_BOUND = "code for one launch configuration"
"""A need of compiled code: its compile read the launch's configuration (:mod:`overdub.cuda.launchconfig`), so
the code is one ``od.jit`` kernel's, for that configuration; no other launch runs it, and the disk cache does
not keep it."""


def configuration_bound(kernel: Kernel) -> bool:
    """Was ``kernel`` compiled for one launch configuration, which an ``od.jit`` kernel launches itself?"""
    return bool(kernel.needs) and CONFIGURATION_BOUND in kernel.needs


def _building(job: CompileJob, kernel: Guarded) -> bool:
    """Start building ``kernel`` (inside ``world.building``): it depends on each context of the chain; False
    where the chain is no longer what the job's first context makes (a parent changed since the job was
    made), so the kernel is built invalid and the next launch makes the job anew."""
    consult_chain(job.chain)
    return job.chain[0].chain(job.target, state_type(job.chain)) == job.chain


def _loaded_kernel(job: CompileJob) -> Kernel | None:
    """``job``'s kernel from the disk cache, its recorded edges re-checked (and made its edges) here."""
    from . import diskcache

    kernel = Kernel(job)
    with world.building(kernel):
        loaded = _building(job, kernel) and diskcache.load(job, kernel)
    if loaded:
        return kernel
    world.retire([kernel])  # it holds the edges of a partial check
    return None


def _built_kernel(job: CompileJob, store: bool = True) -> Kernel:
    """``job``'s kernel compiled, and written to the disk cache where ``store`` says."""
    target = job.target
    kernel = Kernel(job)
    started = time.perf_counter()
    kernel.code = build(job, kernel, target.compile_kernel, f"compiling kernel {job.call()} for {target.label}")
    kernel.launcher = target.link(kernel.code)
    compiles = compile_ms.setdefault(kernel.describe(), collections.deque(maxlen=16))
    compiles.append((world.current_world(), (time.perf_counter() - started) * 1e3))
    runtime.count("compiles")
    if store and not configuration_bound(kernel):
        from . import diskcache

        diskcache.store(job, kernel)
    return kernel


# a kernel's description -> its latest compiles: (the world it compiled in, how long it took in ms), what
# od.invalidation_tree shows after each invalidation of it (the compile that followed it)
compile_ms: dict[str, collections.deque[tuple[int, float]]] = {}
runtime.register_cache(f"{__name__}.compile_ms", compile_ms)


def build(
    job: CompileJob, node: Guarded, compile_with: Callable[[pytypes.FunctionType, tuple[object, ...]], _T], what: str
) -> _T:
    """``compile_with(rewritten function, argument types)`` for ``job`` while building ``node`` (its edges);
    a failure numba explains retires the node and is a CompileError headed ``what``."""
    try:
        with world.building(node):
            if not _building(job, node):
                node.valid = False
            func = cast(pytypes.FunctionType, job.func)
            return compile_with(rewrite(func, job.chain, len(job.argtypes)), job.argtypes)
    except Exception as exc:
        world.retire([node])
        # dispatch's own MethodError stands -- unless a construct kernels lack caused it (d[k] of a dict:
        # getitem's); a failure of numba's stands as numba's report, with a plain account where there is one
        message = None if isinstance(exc, MethodError) else bridge.compile_error_message(exc)
        report = str(exc) if isinstance(exc, MethodError) else message or f"{type(exc).__name__}: {exc}"
        from .diagnosis import diagnosed

        diagnosis = diagnosed(cast(pytypes.FunctionType, job.func), report)
        if message is None and diagnosis is None:
            if isinstance(exc, MethodError):
                raise also_numba_error(exc, bridge.TypingError) from None
            raise
        numba_class = None if isinstance(exc, MethodError) else bridge.numba_error_class(exc)
        raise compile_error(numba_class, explained(what, diagnosis, report), f"{what}:\n{report}") from None


def explained(what: str, diagnosis: Diagnosis | None, report: str) -> str:
    """A compile failure's message: headed ``what``, the plain account where there is one -- numba's report
    then follows with ``OVERDUB_ERRORS=full``, and is the error's ``details`` always -- else numba's report."""
    if diagnosis is None:
        return f"{what}:\n{report}"
    plain = f"{what}:\n{diagnosis.where + ': ' if diagnosis.where else ''}{diagnosis.what}"
    if settings.ERRORS.value() == "full":
        return f"{plain}\n\nnumba's report:\n{report}"
    return f"{plain}\n(numba's report: the error's .details, or OVERDUB_ERRORS=full to show it here)"


def _reason(job: CompileJob, stale: Kernel | None) -> str:
    reason = runtime.kernels.reason(job)
    if reason is not None:
        return reason
    return f"first launch of {job.call()}" if stale is None else f"a global read by {job.call()} was rebound"


def explain(job: CompileJob) -> list[tuple[world.Node, str]]:
    """The edges of the cached kernel for ``job``, each with its text and the world range it is valid for:
    what the kernel's validity depends on. Empty when no such kernel is cached."""
    kernel = runtime.kernels.get(job)
    if kernel is None:
        return []
    return [(node, f"{node.describe()} [worlds {node.worlds()}]") for node in kernel.edges]
