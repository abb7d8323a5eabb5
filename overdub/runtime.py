"""Everything overdub keeps in a process, in one place, and how each thing is let go.

The :data:`runtime` object owns the caches the pipeline fills -- compiled kernels, compiled method instances,
launch functions, the interned call-site proxies of the rewrite pass, the module-global bindings -- and the
counters of :func:`overdub.stats`. The world counter and its lock stay global in :mod:`overdub.world`, as in
Julia; dispatch caches live on the method tables that own them.

What a redefinition or a re-run notebook cell leaves behind must not stay alive:

* compile caches are keyed by a compile job that holds its function *weakly*; when the function is collected
  (a kernel redefined by re-running its cell, a method replaced), its entries are retired -- detached from the
  backedge sets of what they consulted -- and the launch functions made for it are dropped;
* an invalidated node leaves its cache at once (``on_invalidate``), and a kernel's launch functions with it;
* proxies are interned weakly: they live as long as some compiled code's globals refer to them.

Functions die inside the garbage collector, which may run in the middle of anything; their death only queues
the cleanup, and :meth:`Runtime.collect` (run by every compile and every slow-path launch) carries it out.

Caches that live beside their owner, at module level (a code object's digest, a class's argument kind, the
loader of a launch tuple), are *registered* here beside their definition, as JAX's ``linear_util.cache``
registers its clearing function: ``runtime.register_cache(f"{__name__}._kinds", _kinds)``. :meth:`reset`
clears each of them, except those registered ``kept=`` with the reason they must outlive a reset -- numba's
typing keeps every intrinsic's template, so a new loader per reset would leak; a class made at run time is a
definition that live objects are instances of. :meth:`Runtime.caches` lists them all, and
tests/test_caches.py checks that every module-level cache of the package is registered. None of them is
keyed by the ``id()`` of an object that can die.
"""

from __future__ import annotations

import itertools
import types
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from . import world

try:
    from . import _fastlaunch
except ImportError:  # built without a C compiler: launches go through generated Python
    _fastlaunch = None  # type: ignore[assignment]  # mypy types a module, not "the module or None"

__all__ = ["Runtime", "FunctionCache", "ModuleCache", "runtime", "launch_key", "strong_or_weak", "STATE_MARK"]


def strong_or_weak(obj: object) -> object:
    """How a cache key holds a function or a context: by its canonical weak reference where it has one."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return obj


class _StateMark:
    def __repr__(self) -> str:
        return "state="


STATE_MARK = _StateMark()
"""In a launch key, says that the next class is the class of a launch's state."""


class Job(Protocol):
    """What the caches key nodes by, as this layer sees it: a compile job (:class:`overdub.job.CompileJob`),
    hashable, holding its function by ``func_ref``."""

    @property
    def func_ref(self) -> object: ...


class LaunchedKernel(Protocol):
    """What the launch table reads of a launch function's kernel (a :class:`overdub.compiler.Kernel`)."""

    @property
    def valid(self) -> bool: ...
    @property
    def launch_keys(self) -> set[tuple[object, ...]]: ...


class Launch(Protocol):
    """A launch function as the launch table holds it: :class:`overdub.targets.LaunchFunction` seen from this
    layer (the targets sit above it)."""

    @property
    def kernel(self) -> LaunchedKernel: ...
    @property
    def guarded(self) -> bool: ...
    def __call__(
        self, args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object, /
    ) -> bool: ...


def _launch_key(
    kernel: object, context: object, target: object, args: Iterable[object], state: object = None
) -> tuple[object, ...]:
    if state is None:
        return (strong_or_weak(kernel), context, target, *map(type, args))
    return (strong_or_weak(kernel), context, target, STATE_MARK, type(state), *map(type, args))


def launch_key(
    kernel: object, context: object, target: object, args: Iterable[object], state: object = None
) -> tuple[object, ...]:
    """The launch table's key: (kernel, context, target option, argument classes); for a launch passing
    state, (kernel, context, target option, :data:`STATE_MARK`, the state's class, argument classes). Where
    the native extension is built this is its own function, the one its lookup uses (``_fastlaunch.c``); the
    Python definition serves builds without it, and tests/test_fastlaunch.py checks the two agree."""
    if _fastlaunch is None:
        return _launch_key(kernel, context, target, args, state)
    return _fastlaunch.launch_key(kernel, tuple(args), context, target, state)


class FunctionCache:
    """Nodes keyed by compile jobs (anything with a ``func_ref``), dropped when the job's function dies.

    An entry removed by invalidation leaves only why it was removed (a string), which the next compile of
    the same job reports as its reason."""

    def __init__(self, owner: Runtime) -> None:
        self._owner = owner
        self._nodes: dict[Job, world.Node] = {}
        self._reasons: dict[Job, str] = {}  # job -> why its last node was invalidated
        self._by_function: dict[object, set[Job]] = {}  # canonical weak reference -> the jobs of that function

    def get(self, job: Job) -> world.Node | None:
        return self._nodes.get(job)

    def put(self, job: Job, node: world.Node) -> None:
        with world.lock:
            self._nodes[job] = node
            self._reasons.pop(job, None)
            jobs = self._by_function.get(job.func_ref)
            if jobs is None:
                jobs = self._by_function[job.func_ref] = set()
                self._owner.watch(job.func_ref)
            jobs.add(job)

    def discard(self, job: Job, node: world.Node, reason: str | None = None) -> None:
        """Remove ``job``'s entry if it is still ``node``, remembering ``reason``."""
        with world.lock:
            if self._nodes.get(job) is node:
                del self._nodes[job]
                if reason is not None:
                    self._reasons[job] = reason
                else:
                    self._by_function.get(job.func_ref, set()).discard(job)

    def reason(self, job: Job) -> str | None:
        """Why the last node of ``job`` was invalidated, if it was."""
        return self._reasons.get(job)

    def drop_function(self, ref: object) -> list[world.Node]:
        """Remove every entry of the function behind ``ref``; returns their nodes."""
        jobs = self._by_function.pop(ref, ())
        for job in jobs:
            self._reasons.pop(job, None)
        return [self._nodes.pop(job) for job in jobs if job in self._nodes]

    def nodes(self) -> list[world.Node]:
        return list(self._nodes.values())

    def clear(self) -> list[world.Node]:
        nodes = self.nodes()
        self._nodes.clear()
        self._reasons.clear()
        self._by_function.clear()
        return nodes

    def __len__(self) -> int:
        return len(self._nodes)


class ModuleCache(NamedTuple):
    """A module-level cache the runtime accounts for: :meth:`Runtime.reset` calls ``clear``, or, for a cache
    ``kept`` across resets, nothing (``kept`` says why)."""

    name: str  # "overdub.module.variable"
    cache: object  # the dict, weak dictionary or functools cache; None for a value memoized in a global
    clear: Callable[[], None] | None
    kept: str | None


class Runtime:
    """The process's caches and counters (see the module docstring); :meth:`reset` empties them."""

    def __init__(self) -> None:
        self.kernels = FunctionCache(self)  # CompileJob -> compiler.Kernel
        self.methods = FunctionCache(self)  # CompileJob -> instances.MethodInstance
        # launch_key(...) -> [launch functions], replaced, never mutated
        self.launches: dict[tuple[object, ...], list[Launch]] = {}
        self._launch_keys: dict[object, set[tuple[object, ...]]] = {}  # kernel function's reference -> its launch keys
        # (kind, chain, id(value)) -> rewrite proxy
        self.proxies: weakref.WeakValueDictionary[tuple[object, ...], object] = weakref.WeakValueDictionary()
        # a closure kernel's code -> its lifted function, or None
        self.lifted: weakref.WeakKeyDictionary[types.CodeType, types.FunctionType | None] = weakref.WeakKeyDictionary()
        # the edges on Python state, alive while some compiled thing uses them (each holds what its key's id
        # names, so the id stays unique while the entry exists)
        # (id(namespace), name, builtins?) -> Binding
        self.bindings: weakref.WeakValueDictionary[tuple[int, str, bool], world.Node] = weakref.WeakValueDictionary()
        self.cells: weakref.WeakValueDictionary[int, world.Node] = (
            weakref.WeakValueDictionary()
        )  # id(cell) -> CellBinding
        # weak reference to a function -> bindings.FunctionState
        self.functions: weakref.WeakValueDictionary[object, world.Node] = weakref.WeakValueDictionary()
        # id(array) -> bindings.ArrayContents (which holds the array): a host array frozen into compiled code
        self.arrays: weakref.WeakValueDictionary[int, world.Node] = weakref.WeakValueDictionary()
        self._watchers: dict[object, weakref.ref[object]] = {}  # function reference -> its death callback's reference
        self._dead: list[object] = []  # references of functions that died, to clean up
        self._counters = {"compiles": 0, "method_instances": 0, "disk_hits": 0, "disk_misses": 0, "disk_uncacheable": 0}
        self._launches = itertools.count()  # next() is atomic under the GIL: no lock on the hot path
        self._launch_base = 0
        self._module_caches: dict[str, ModuleCache] = {}  # name -> the module-level cache registered under it

    # -- functions dying ---------------------------------------------------------------------------------
    def watch(self, ref: object) -> None:
        """Clean up after the function behind ``ref`` once it is collected."""
        if isinstance(ref, weakref.ref) and ref not in self._watchers:
            target = ref()
            if target is not None:

                def died(_: weakref.ref[object], dead: object = ref) -> None:
                    self._dead.append(dead)

                self._watchers[ref] = weakref.ref(target, died)

    def collect(self) -> None:
        """Retire the caches' entries for functions that have died since the last call."""
        if not self._dead:
            return
        with world.lock:
            while self._dead:
                ref = self._dead.pop()
                self._watchers.pop(ref, None)
                world.retire([*self.kernels.drop_function(ref), *self.methods.drop_function(ref)])
                for key in self._launch_keys.pop(ref, ()):
                    self.launches.pop(key, None)

    # -- launch functions --------------------------------------------------------------------------------
    def add_launch(self, key: tuple[object, ...], launch: Launch) -> None:
        """Add a launch function under ``key``, dropping those whose kernel is no longer valid."""
        with world.lock:
            live = [f for f in self.launches.get(key, ()) if f.kernel.valid]
            self.launches[key] = live + [launch]
            self._launch_keys.setdefault(key[0], set()).add(key)
            launch.kernel.launch_keys.add(key)
            self.watch(key[0])

    def drop_launches(self, kernel: LaunchedKernel) -> None:
        """Remove the launch functions made for the compiled ``kernel`` (it was invalidated)."""
        with world.lock:
            for key in kernel.launch_keys:
                kept = [f for f in self.launches.get(key, ()) if f.kernel is not kernel]
                if kept:
                    self.launches[key] = kept
                else:
                    self.launches.pop(key, None)
            kernel.launch_keys.clear()

    # -- counters ----------------------------------------------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        with world.lock:
            self._counters[name] += n

    def count_launch(self) -> None:
        next(self._launches)

    def stats(self) -> dict[str, int]:
        """Counters since the process started or the last reset: kernels compiled (``compiles``: real
        compilations only), method instances compiled, kernels loaded from the disk cache (``disk_hits``),
        lookups there that found no usable entry (``disk_misses``), compiled kernels it could not store
        (``disk_uncacheable``), launches (by the generated and the native launch functions)."""
        with world.lock:
            counters = dict(self._counters)
        counters["launches"] = self._raw_launches() - self._launch_base
        return counters

    def _raw_launches(self) -> int:
        python = int(repr(self._launches)[6:-1])  # repr "count(N)" reads, not advances
        return python + (_fastlaunch.launch_count() if _fastlaunch is not None else 0)

    # -- module-level caches ------------------------------------------------------------------------------
    def register_cache(
        self,
        name: str,
        cache: Any = None,  # a dict, a weak dictionary, a functools cache (cleared by what it has), or None
        *,
        kept: str | None = None,
        clear: Callable[[], None] | None = None,
    ) -> Any:
        """Account for the module-level cache ``name`` ("overdub.module.variable") and return ``cache``.
        :meth:`reset` empties it -- with ``clear``, else its ``cache_clear()`` (a functools cache) or
        ``clear()`` -- unless ``kept`` gives the reason it must outlive a reset."""
        if kept is None and clear is None:
            clear = getattr(cache, "cache_clear", None) or cache.clear
        self._module_caches[name] = ModuleCache(name, cache, None if kept is not None else clear, kept)
        return cache

    def caches(self) -> list[ModuleCache]:
        """The registered module-level caches, cleared by :meth:`reset` or kept across it."""
        return list(self._module_caches.values())

    # -- reset -------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every compiled kernel, method instance, launch function, proxy and binding, empty the
        registered module-level caches not kept, and zero the counters. Generic functions, their methods and contexts are definitions, not caches: they stay.
        Everything forgotten is retired (detached from what it consulted), so the next launch compiles
        afresh and nothing reachable keeps the old code alive. Used by the tests between tests."""
        with world.lock:
            self.collect()
            edges = [*self.bindings.values(), *self.cells.values(), *self.functions.values(), *self.arrays.values()]
            world.retire([*self.kernels.clear(), *self.methods.clear(), *edges])
            self.launches.clear()
            self._launch_keys.clear()
            self.proxies.clear()
            self.lifted.clear()
            self.bindings.clear()
            self.cells.clear()
            self.functions.clear()
            self.arrays.clear()
            self._watchers.clear()
            self._dead.clear()
            self._counters = dict.fromkeys(self._counters, 0)
            for cache in self._module_caches.values():
                if cache.clear is not None:
                    cache.clear()
            self._launch_base = self._raw_launches()


runtime = Runtime()
