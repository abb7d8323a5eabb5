"""Edges on module globals: a compiled thing stays valid only while every global it read keeps its value.

Python has no hook on a module's dict that works on every supported version (dict watchers are 3.12+ and
C-only), so overdub uses the two-level check GPUCompiler uses for world ages. Each namespace a compiled thing
read from is recorded with its dict *version tag* (PEP 509's ``ma_version_tag``, bumped by every change of
the dict). The fast check compares those tags: one integer read per namespace, no walk over edges. When a
tag moved -- some global of that module changed, maybe an unrelated one -- the slow check compares each
recorded :class:`Binding` of that namespace with its current value and invalidates the ones that really
changed (and, through backedges, everything built from them); then it records the new tag.

On Python 3.14+, where dicts no longer carry a version tag, every check is the slow one.
"""
from __future__ import annotations

import builtins
import ctypes
import sys

from . import world
from .runtime import runtime

_MISSING = object()
# PyDictObject: PyObject_HEAD (refcount, type), Py_ssize_t ma_used, uint64_t ma_version_tag.
_VERSION_OFFSET = 3 * ctypes.sizeof(ctypes.c_void_p)
_HAS_VERSION_TAG = sys.version_info < (3, 14)


def version_view(namespace: dict):
    """A live view of the namespace dict's version tag (``.value``), or None where there is none."""
    if not _HAS_VERSION_TAG:
        return None
    return ctypes.c_uint64.from_address(id(namespace) + _VERSION_OFFSET)


def dict_version(namespace: dict) -> int:
    """The namespace dict's version tag (0 where the interpreter has none: always take the slow path)."""
    view = version_view(namespace)
    return 0 if view is None else view.value


def _same_value(a, b) -> bool:
    if a is b:
        return True
    # re-executing `N = 2.5` makes a new float object with the same value: that is no change
    return type(a) is type(b) and type(a) in (int, float, complex, bool, str, bytes) and a == b


def lookup(namespace: dict, name: str):
    """What ``name`` means in a function whose globals are ``namespace`` (a global, else a builtin)."""
    value = namespace.get(name, _MISSING)
    if value is _MISSING:
        value = getattr(builtins, name, _MISSING)
    return value


class Binding(world.Node):
    """The value ``name`` had in ``namespace`` when something read it."""

    __slots__ = ("namespace", "name", "value", "seen_version")

    def __init__(self, namespace: dict, name: str, value, seen_version: int):
        super().__init__()
        self.namespace, self.name, self.value = namespace, name, value
        self.seen_version = seen_version     # the dict's version tag just before the value was read

    def changed(self) -> bool:
        return not _same_value(lookup(self.namespace, self.name), self.value)

    def on_invalidate(self, cause: str) -> None:
        key = (id(self.namespace), self.name)
        if runtime.bindings.get(key) is self:
            del runtime.bindings[key]

    def describe(self) -> str:
        module = self.namespace.get("__name__", "?")
        return f"global {module}.{self.name}"


def rebound(bindings: list[Binding], namespace: dict) -> None:
    """Invalidate bindings whose globals were rebound: a new world, as a method-table change is."""
    world.bump_world()
    for binding in bindings:
        world.invalidate([binding], f"global {namespace.get('__name__', '?')}.{binding.name} rebound")


def read(namespace: dict, name: str):
    """Read a global for a compile: returns its value and makes it an edge of the node being built."""
    seen_version = dict_version(namespace)
    value = lookup(namespace, name)
    key = (id(namespace), name)
    with world.lock:
        binding = runtime.bindings.get(key)
        if binding is not None and binding.changed():
            rebound([binding], namespace)
            binding = None
        if binding is None:
            binding = runtime.bindings[key] = Binding(namespace, name, value, seen_version)
        world.consult(binding)
        builder = world.being_built()
        if isinstance(builder, Guarded):
            builder.guard.add(binding)
    return binding.value


class Guard:
    """The globals a compiled thing read (directly or through what it calls), checked cheaply before use."""

    __slots__ = ("_checks", "_bindings")

    def __init__(self):
        self._checks: dict[int, list] = {}              # id(namespace) -> [version view, tag when checked]
        self._bindings: dict[int, list[Binding]] = {}   # id(namespace) -> bindings read from it

    def add(self, binding: Binding) -> None:
        ns = id(binding.namespace)
        group = self._bindings.setdefault(ns, [])
        if binding in group:
            return
        group.append(binding)
        check = self._checks.get(ns)
        if check is None:
            self._checks[ns] = [version_view(binding.namespace), binding.seen_version]
        else:        # the oldest tag wins: a change since any of the reads forces one slow check
            check[1] = min(check[1], binding.seen_version)

    def include(self, other: "Guard") -> None:
        """Also guard what ``other`` guards (a callee's globals are its callers' edges too)."""
        for group in other._bindings.values():
            for binding in group:
                self.add(binding)

    def fresh(self) -> bool:
        """Fast check: no namespace this guard covers has changed at all since it was last checked."""
        for view, version in self._checks.values():
            if view is None or view.value != version:
                return False
        return True

    def native_checks(self) -> list[tuple[int, list]] | None:
        """(address of each namespace's version tag, its [view, tag] entry) for native launchers, or None
        where the interpreter has no version tags."""
        if any(view is None for view, _ in self._checks.values()):
            return None
        return [(ctypes.addressof(check[0]), check) for check in self._checks.values()]

    def revalidate(self) -> bool:
        """Slow check: invalidate the bindings that really changed; True when none of this guard's did."""
        ok = True
        with world.lock:
            for ns, group in self._bindings.items():
                namespace = group[0].namespace
                version = dict_version(namespace)
                changed = [b for b in group if b.valid and b.changed()]
                if changed:
                    rebound(changed, namespace)
                ok = ok and all(b.valid for b in group)
                self._checks[ns][1] = version
        return ok


class Guarded(world.Node):
    """A compiled thing: its validity also depends on module globals (its :class:`Guard`), and it may need
    things of the target at run time (``needs``: named by the target, inherited by every caller)."""

    __slots__ = ("guard", "needs")

    def __init__(self):
        super().__init__()
        self.guard = Guard()
        self.needs: set[str] = set()

    def usable(self) -> bool:
        """Valid and none of its globals changed (the O(1)-per-namespace check, slow path on a tag change)."""
        return self.valid and (self.guard.fresh() or (self.guard.revalidate() and self.valid))
