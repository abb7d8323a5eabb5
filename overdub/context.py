"""Contexts: tables of overdubs that a kernel is compiled in.

A :class:`Context` maps callees to overdub method tables. A kernel launched in a user context is compiled in
the *chain* user context -> its parents -> the target's base context (``od.CPU``, ``od.CUDA``: made by the
registry of targets, ``overdub.targets.registry``) -> the
callee itself; each call asks the chain in that order and the first context with an applicable overdub wins.
An overdub method's own body is compiled one context down (the chain after the context it came from), the
way PyTorch's dispatch modes pop themselves while their handler runs: calling ``f`` inside ``f``'s overdub
reaches the next implementation.

Libraries extend contexts -- ``od.CPU`` and ``od.CUDA`` too -- by registering overdubs from their own
modules; :func:`when_imported` runs such registrations once the library they target is imported.

A context may also carry device *state* (Cassette's metadata) -- a value each launch passes, of the type the
context declares -- and *hooks*: device code run before (``prehook``) or after (``posthook``) the calls
it observes, without replacing them. A hook of a context observes a call that reaches the context: one that
no overdub of a context before it in the chain took (see docs/contexts.md).
"""

from __future__ import annotations

import sys
import types as pytypes
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast
from typing import Any as Arbitrary

from . import postimport, world
from .hooktables import HookTables
from .registry import MethodTable, methods_from, reference_to
from .runtime import runtime
from .types import (
    LatticeType,
    as_type,
    callee_key,
    callee_name,
    is_overdubbable,
    issubtype,
    type_name,
)

if TYPE_CHECKING:
    from numba.core import types as nt

    from .targets import Target

__all__ = [
    "Context",
    "BaseContext",
    "when_imported",
    "callee_key",
]

_F = TypeVar("_F", bound=Callable[..., Arbitrary])  # a def a decorator registers, and returns as it is
_H = TypeVar("_H", bound=postimport.Hook)


class ContextShape(world.Node):
    """What a context is made of besides its overdub tables -- its parent, forwards and replacements -- as
    an edge: changing any of them invalidates what was compiled in a chain through the context."""

    __slots__ = ("context",)

    def __init__(self, context: Context):
        super().__init__()
        self.context = context

    def describe(self) -> str:
        return f"the parent, forwards, replacements and catch-all hooks of {self.context!r}"


_every_context: weakref.WeakSet[Context] = weakref.WeakSet()
runtime.register_cache(f"{__name__}._every_context", _every_context, kept="definitions, not a cache")


# (module, line, name) of a module-level statement making a context -> (the context, the code that made it)
_statements: dict[tuple[object, int, str], tuple[weakref.ref[Context], weakref.ref[pytypes.CodeType]]] = {}
runtime.register_cache(f"{__name__}._statements", _statements)


def every_context() -> list[Context]:
    """The contexts alive in this process, in no particular order."""
    return list(_every_context)


class Context(HookTables):
    """A named table of overdubs, optionally inheriting from a parent context.

    Its parent, forwards and replacements may change at any time; whatever was compiled in a chain through
    the context recompiles on its next launch.
    """

    overdubbable = True  # False only for a target's root, which holds no overdubs

    def __new__(cls, name: str, parent: Context | None = None, state: object = None) -> Context:
        """A new context -- or, for a module-level statement run again (a notebook cell, ``exec``, a reload:
        a new code object at the same line of the same module) making the same context (name, parent, state),
        the context it made: its overdubs, defined again unchanged, change nothing, and what was compiled in
        it stays (:mod:`overdub.reruns`)."""
        if cls is not Context:
            return super().__new__(cls)
        caller = sys._getframe(1)
        key = (caller.f_globals.get("__name__"), caller.f_lineno, name)
        if caller.f_code.co_name != "<module>":
            return super().__new__(cls)
        made = _statements.get(key)
        ctx, code = (made[0](), made[1]()) if made is not None else (None, None)
        declared = None if state is None else as_type(state)
        if ctx is not None and code is not caller.f_code and ctx._parent is parent and ctx._state == declared:
            return ctx
        ctx = super().__new__(cls)
        _statements[key] = (weakref.ref(ctx), weakref.ref(caller.f_code))
        return ctx

    def __init__(self, name: str, parent: Context | None = None, state: object = None) -> None:
        if "name" in vars(self):  # made already: a statement run again (__new__)
            return
        self.name = name
        # where it is made: for pickling (a module's name; None only for code run with no __name__)
        self.__module__ = cast(str, sys._getframe(1).f_globals.get("__name__"))
        self._parent = parent
        self._state: LatticeType | None = None if state is None else as_type(state)
        self._tables: dict[object, MethodTable] = {}  # callee key -> its overdub table
        HookTables.__init__(self)
        self._forwards: dict[object, object] = {}  # callee key -> what calls of the callee mean
        self._replacements: dict[int, tuple[object, object]] = {}  # id(obj) -> (obj, its replacement)
        # keeps the module namespaces named by callee keys alive
        self._namespaces: dict[int, dict[str, Arbitrary]] = {}
        self.shape = ContextShape(self)
        _every_context.add(self)

    def __reduce__(self) -> tuple[object, ...]:
        """By reference: the module-level variable of the module it was made in that holds it -- or, once
        :mod:`overdub.travel` is imported, by value where no such name finds it in every process (its
        :data:`reduce_context`)."""
        reduced = None if reduce_context is None else reduce_context(self)
        if reduced is not None:
            return reduced
        module = sys.modules.get(self.__module__)
        names = [name for name, value in vars(module).items() if value is self] if module else []
        return reference_to(self, self.__module__, names[0] if names else self.name)

    def overdub_tables(self) -> list[tuple[object, MethodTable]]:
        """Its overdub tables with methods, each with its callee (what ships its definitions to another
        process reads them: :mod:`overdub.travel`)."""
        tables = self._tables.values()
        return [(cast("tuple[Context, object]", table.owner)[1], table) for table in tables if table.methods]

    @property
    def parent(self) -> Context | None:
        return self._parent

    @parent.setter
    def parent(self, parent: Context | None) -> None:
        self._reshape(f"parent of {self!r} set to {parent!r}", lambda: setattr(self, "_parent", parent))

    @property
    def state(self) -> LatticeType | None:
        """The declared type of this context's device state (``Context(name, state=T)``), or its nearest
        parent's; None when no context of the chain declares one. Launches pass a value of it (``state=``)."""
        ctx: Context | None = self
        while ctx is not None and ctx._state is None:
            ctx = ctx.parent
        return None if ctx is None else ctx._state

    def launch_state_type(self, state: object, typeof: Callable[[object], object]) -> object:
        """The numba type of a launch's ``state`` value (``typeof`` types it; None for a launch without
        state), checked against the type this context declares: a context with state needs a value of its
        type, a context without takes none."""
        declared = self.state
        if declared is None:
            if state is None:
                return None
            raise TypeError(
                f"od.cuda(..., state=...): {self!r} declares no state; declare its type with "
                f"od.Context({self.name!r}, state=T) to pass one"
            )
        if state is None:
            raise TypeError(
                f"{self!r} declares state of type {type_name(declared)}: pass its value for the launch, "
                f"od.cuda(..., context={self.name}, state=value)"
            )
        state_type = typeof(state)
        if not issubtype(state_type, declared):
            raise TypeError(
                f"od.cuda(..., state=...): {self!r} declares state of type {type_name(declared)}, not "
                f"{state_type} ({type(state).__name__} {state!r:.60})"
            )
        return state_type

    def _reshape(self, cause: str, change: Callable[[], object]) -> None:
        with world.lock:
            change()
            world.bump_world()
            stale, self.shape = self.shape, ContextShape(self)
            world.invalidate([stale], cause, internal=not self.overdubbable)  # a target's root: overdub's

    def _key(self, callee: object) -> object:
        if isinstance(callee, pytypes.FunctionType):
            self._namespaces[id(callee.__globals__)] = callee.__globals__
        return callee_key(callee)

    # -- defining overdubs -----------------------------------------------------------------------------
    def overdub(self, callee: Callable[..., Arbitrary]) -> Callable[[_F], _F]:
        """Decorator: add the def as an overdub method for ``callee`` in this context.

        ``callee`` may be a generic function, a plain Python function, a builtin (``print``), a module
        function (``math.sin``) or an intrinsic (``od.unsafe_store``). The method dispatches on its
        annotations like a generic method; inside it, calls run one context down.
        """
        if isinstance(callee, type):
            raise TypeError(
                f"{self.name}.overdub({callee.__qualname__}): {callee.__qualname__} is a class; "
                f"contexts substitute calls of functions -- overdub a function that constructs or "
                f"converts instead"
            )
        if not is_overdubbable(callee):
            raise TypeError(
                f"{self.name}.overdub({callee!r}): only functions can be overdubbed"
                + (" (numba requires len to stay the builtin)" if callee is len else "")
            )

        def define(func: _F) -> _F:
            for method in methods_from(f"{self.name}.overdub({callee_name(callee)})", func):
                self.table(callee).add(method)
            return func

        return define

    def table(self, callee: object) -> MethodTable:
        """The overdub table for ``callee`` (empty until an overdub is added; lookups in it are edges too)."""
        key = self._key(callee)
        table = self._tables.get(key)
        if table is None:
            owner = (self, cast("Callable[..., Arbitrary]", callee))  # a callee: what is_overdubbable accepts
            with world.lock:
                table = self._tables.setdefault(
                    key, MethodTable(f"{self.name}.overdub({callee_name(callee)})", owner=owner)
                )
        return table

    def forward(self, callee: object, to: object) -> None:
        """Make calls of ``callee`` that no overdub takes mean calls of ``to`` (``print`` -> ``cuprintln``)."""
        key = self._key(callee)
        self._reshape(
            f"{self!r} forwards {callee_name(callee)} to {callee_name(to)}", lambda: self._forwards.__setitem__(key, to)
        )

    def contents(self) -> tuple[list[tuple[object, object]], list[tuple[object, object]]]:
        """Its forwards as (callee, target) pairs -- a function at a module's top level named
        ``"module.qualname"``, as overdub tables name it -- and its replacements as (object, replacement) pairs:
        what a context is made of besides its parent and its tables (the disk cache keys a chain by it)."""
        forwards = [(self._callee_name(key), to) for key, to in self._forwards.items()]
        return forwards, list(self._replacements.values())

    def travelling(self) -> list[tuple[str, object, object]]:
        """What this context holds besides its overdub tables, as (kind, callee, value) items another process
        defines again with :meth:`define_travelled`: each hook's def (kind PREHOOK or POSTHOOK), each forward's
        target ("forward"), each replacement ("replace"), and which callees' hooks are off ("hooks off")."""
        items: list[tuple[str, object, object]] = []
        for (kind, key), table in self._hook_tables.items():
            items += [(kind, self._callee_of(key), method.func) for method in table.methods if not method.generated]
        items += [(kind, self._callee_of(key), method.func) for (kind, key, _), method in self._catch_all.items()]
        items += [("forward", self._callee_of(key), to) for key, to in self._forwards.items()]
        items += [("replace", obj, replacement) for obj, replacement in self._replacements.values()]
        items += [("hooks off", self._callee_of(key), off) for key, off in self._hooks_off.items()]
        return items

    def define_travelled(self, kind: str, callee: object, value: Arbitrary) -> None:
        """Define again here what :meth:`travelling` of the sender's context gave."""
        if kind == "forward":
            self.forward(callee, value)
        elif kind == "replace":
            self.replace(callee, value)
        elif kind == "hooks off":
            self._switch_hooks(callee, bool(value))
        else:
            self._hook(kind, callee)(value)

    def _callee_of(self, key: object) -> object:
        """The callee a table key names (a top-level function: the one its namespace holds now)."""
        if isinstance(key, tuple):
            value: object = self._namespaces[key[0]]
            for part in key[1].split("."):
                value = value[part] if isinstance(value, dict) else getattr(value, part)
            return value
        return key

    def _callee_name(self, key: object) -> object:
        if isinstance(key, tuple):
            return f"{self._namespaces[key[0]].get('__name__')}.{key[1]}"
        return key

    def forwarded(self, callee: object) -> object:
        return self._forwards.get(callee_key(callee))

    def replace(self, obj: object, replacement: object) -> None:
        """Make the object ``obj`` mean ``replacement`` wherever a kernel names it (a target's kernel idiom)."""
        self._reshape(
            f"{self!r} replaces {callee_name(obj)}", lambda: self._replacements.__setitem__(id(obj), (obj, replacement))
        )

    def replacement(self, obj: object) -> object:
        entry = self._replacements.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def hides(self, callee: object) -> bool:
        """Are calls of ``callee`` kept out of what hooks observe? Only a target's root (the last context of
        every chain) hides any: :meth:`TargetRoot.hide`."""
        return False

    # -- chains ----------------------------------------------------------------------------------------
    def chain(self, target: Target, state: object = None) -> tuple[Context, ...]:
        """This context, its parents, the target's base context (other targets' base contexts are
        skipped), then the target's root -- for a launch passing state of the numba type ``state``, the
        root that says so."""
        base = target.base
        chain: list[Context] = []
        ctx: Context | None = self
        while ctx is not None:
            if not isinstance(ctx, BaseContext) or ctx is base:
                chain.append(ctx)
            ctx = ctx.parent
        if chain[-1] is not base:
            chain.append(base)
        chain.append(target.root if state is None else target.root.with_state(cast("nt.Type", state)))
        return tuple(chain)

    def __repr__(self) -> str:
        return f"Context({self.name!r})"


class BaseContext(Context):
    """A target's own context (``od.CPU``, ``od.CUDA``): the last one asked before the callee itself.

    Libraries extend it with overdubs like any other context.
    """


# how a context of the user's code travels by value (set by overdub.travel; None: by reference)
reduce_context = None


def when_imported(module_name: str) -> Callable[[_H], _H]:
    """Decorator: run ``hook(module)`` once ``module_name`` is imported (now, if it already is).

    Lets a library register its overdubs for another library lazily, without importing it
    (:mod:`overdub.postimport`).
    """

    def register(hook: _H) -> _H:
        postimport.when_imported(module_name, hook)
        return hook

    return register
