"""A context's hooks: device code run before (``prehook``) or after (``posthook``) the calls it observes.

Each context holds, per kind of hook, a method table per callee (``od.Any``: every call), the catch-all
``*args`` hooks that dispatch on nothing, and which callees' hooks are switched off. A hook of every call
receives the callee as a value of ``od.Callee[f]`` and dispatches on it too. Defining the first hook of a
kind, a catch-all hook, or switching hooks off or on reshapes the context (what was compiled through it
recompiles); a hook added to a table invalidates what its table's dispatch answers fed, like any method.
:class:`HookTables` is that part of :class:`overdub.context.Context`; :mod:`overdub.hooks` generates the
code running them around a call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any as Arbitrary
from typing import TypeVar, cast

from . import world
from .registry import Method, MethodError, MethodTable, methods_from
from .types import Any, Callee, CalleePattern, CalleeType, LatticeType, as_type, callee_name, is_overdubbable, subtype

__all__ = ["HookTables", "PREHOOK", "POSTHOOK"]

_F = TypeVar("_F", bound=Callable[..., Arbitrary])  # a def a decorator registers, and returns as it is

PREHOOK, POSTHOOK = "prehook", "posthook"


def _callee_parameter(func: Callable[..., Arbitrary], kind: str) -> str | None:
    """The parameter of a hook of every call that receives the callee: the first (a prehook's) or the second
    (a posthook's, after the result), or None where the hook names no such parameter."""
    code, position = func.__code__, _callee_position(kind)
    return code.co_varnames[position] if code.co_argcount > position else None


def _callee_position(kind: str) -> int:
    """Where a hook of every call receives the callee: first (a prehook), after the result (a posthook)."""
    return 0 if kind == PREHOOK else 1


def _callee_pattern(label: str, func: Callable[..., Arbitrary], kind: str) -> LatticeType:
    """What the callee parameter of a hook of every call matches (``od.Any`` where unannotated): a clear error
    where the hook has no such parameter, or annotates it with a type no callee has (a hook written for
    the arguments alone would otherwise never run)."""
    name = _callee_parameter(func, kind)
    where = f"{label}: a hook of every call receives the callee {'first' if kind == PREHOOK else 'after the result'}"
    if name is None:
        if func.__code__.co_flags & inspect.CO_VARARGS:
            return Any  # def hook(*args): the callee is args[0]
        raise TypeError(
            f"{where} (def _({'' if kind == PREHOOK else 'result, '}f, *args)); {func.__qualname__} takes no "
            f"parameter for it"
        )
    annotation = func.__annotations__.get(name, Any)
    pattern = as_type(annotation)
    if pattern is not Any and not isinstance(pattern, (CalleePattern, CalleeType)):
        raise TypeError(f"{where}: its parameter {name!r} takes od.Callee or od.Callee[f], not {annotation!r}")
    return pattern


def _is_catch_all(label: str, func: Callable[..., Arbitrary], every: bool, kind: str) -> bool:
    """Is ``func`` a hook for calls of any arity: ``def hook(*args)`` (or ``(result, *args)`` after)? Such a
    hook dispatches on nothing, so annotations on it would be silently ignored: they are refused -- but for
    the callee of a hook of every call (``every``): ``def hook(f: od.Callee[g], *args)`` dispatches on it."""
    code = getattr(func, "__code__", None)
    if code is None or not code.co_flags & inspect.CO_VARARGS:
        return False
    callee_parameter = _callee_parameter(func, kind) if every else None
    annotated = [
        name
        for name, annotation in getattr(func, "__annotations__", {}).items()
        if name not in ("return", callee_parameter) and annotation not in (Any, "od.Any", "Any")
    ]
    if annotated or func.__defaults__:
        raise TypeError(
            f"{label}: a hook taking *args observes calls of any arity and dispatches on nothing, so it "
            f"takes no annotations ({', '.join(annotated)}) or defaults; write a hook per arity to "
            f"dispatch on argument types"
        )
    return True


class HookTables:
    """The hooks of a context (the part of :class:`overdub.context.Context` that holds them)."""

    name: str

    def __init__(self) -> None:
        self._hook_tables: dict[tuple[str, object], MethodTable] = {}  # (PREHOOK or POSTHOOK, callee key) -> table
        # (PREHOOK or POSTHOOK, callee key, callee pattern) -> an *args hook's Method
        self._catch_all: dict[tuple[str, object, LatticeType], Method] = {}
        self._observes: set[str] = set()  # the kinds of hooks ever defined here (others are not looked up)
        self._hooks_off: dict[object, bool] = {}  # callee key (od.Any: every call) -> are its hooks off?

    def _key(self, callee: object) -> object:
        """The key of ``callee`` in the context's tables (the context's own)."""
        raise NotImplementedError

    def _reshape(self, cause: str, change: Callable[[], object]) -> None:
        """Make ``change`` to the context, recompiling what was compiled through it (the context's own)."""
        raise NotImplementedError

    def prehook(self, callee: object) -> Callable[[_F], _F]:
        """Decorator: run the def before each call of ``callee`` (``od.Any``: of every function) that reaches
        this context, with the call's arguments; its return value is ignored. It dispatches on its
        annotations like a method (several prehooks for different types); ``def hook(*args)`` observes
        calls of any arity. Its body runs one context down, like an overdub's."""
        return self._hook(PREHOOK, callee)

    def posthook(self, callee: object) -> Callable[[_F], _F]:
        """Decorator: run the def after each call of ``callee`` (``od.Any``: of every function) that reaches
        this context, with ``(result, *args)`` (Cassette's order); its return value is ignored."""
        return self._hook(POSTHOOK, callee)

    def _hook(self, kind: str, callee: object) -> Callable[[_F], _F]:
        if callee is not Any and not is_overdubbable(callee):
            raise TypeError(
                f"{self.name}.{kind}({callee!r}): hooks observe calls of functions (or od.Any: every "
                f"call), not {type(callee).__name__} values"
            )
        label = f"{self.name}.{kind}({'od.Any' if callee is Any else callee_name(callee)})"

        def define(func: _F) -> _F:
            if kind not in self._observes:  # from now on calls through this context look these hooks up
                self._reshape(f"{label} defined: the first {kind} of {self!r}", lambda: self._observes.add(kind))
            every = callee is Any
            pattern = _callee_pattern(label, func, kind) if every else Any  # (checked for every such hook)
            if _is_catch_all(label, func, every, kind):  # "any arguments": a second one (same callees) replaces it
                method = Method(label, func, (), (), origin=func)
                self._reshape(
                    f"{label} defined for any arguments at {method.location}",
                    lambda: self._catch_all.__setitem__((kind, self._hook_key(callee), pattern), method),
                )
                return func
            for method in methods_from(label, func):
                self._hook_table(kind, callee).add(method)
            return func

        return define

    def _hook_key(self, callee: object) -> object:
        return Any if callee is Any else self._key(callee)

    def _hook_table(self, kind: str, callee: object) -> MethodTable:
        key = (kind, self._hook_key(callee))
        table = self._hook_tables.get(key)
        if table is None:
            with world.lock:
                name = f"{self.name}.{kind}({'od.Any' if callee is Any else callee_name(callee)})"
                table = self._hook_tables.setdefault(key, MethodTable(name))
        return table

    def observes(self, kind: str) -> bool:
        """Has a hook of this kind ever been defined here? (Until one is, calls do not look them up; the first
        one changes the context's shape.)"""
        return kind in self._observes

    def hooks(self, kind: str, callee: object, argtypes: tuple[LatticeType, ...]) -> list[tuple[Method, bool]]:
        """The hook methods of this context observing a call of ``callee`` with ``argtypes`` (for posthooks,
        the result's type first), each with whether it takes the callee: those for ``callee``, then those for
        every call (``od.Any``), which receive the callee first (after the result, for a posthook) as a value
        of ``od.Callee[callee]`` and dispatch on it too; catch-all ``*args`` hooks before dispatched ones.
        Hooks turned off (:meth:`disablehooks`) are not asked. Each lookup is an edge of the node being
        built; a context that never had a hook of this kind answers at once."""
        if kind not in self._observes or self._hooks_off.get(Any) or self._hooks_off.get(self._key(callee)):
            return []
        found: list[tuple[Method, bool]] = []
        callee_type, at = Callee[callee], _callee_position(kind)
        for key in (callee, Any):
            every = key is Any
            typed = (*argtypes[:at], callee_type, *argtypes[at:]) if every else argtypes
            hook_key = self._hook_key(key)
            for (hook_kind, each_key, pattern), method in list(self._catch_all.items()):
                if hook_kind == kind and each_key == hook_key and (not every or subtype(callee_type, pattern)):
                    found.append((method, every))
            match = self._hook_table(kind, key).dispatch(typed)
            if match.ambiguous:
                raise cast(MethodError, match.error())  # an ambiguity's
            if match.method is not None:
                found.append((match.method, every))
        return found

    def disablehooks(self, callee: object = Any) -> None:
        """Turn this context's hooks off -- for every call (``od.Any``, the default) or for calls of
        ``callee`` -- without redefining them: what was compiled through the context recompiles without them.
        :meth:`enablehooks` turns them on again."""
        self._switch_hooks(callee, True)

    def enablehooks(self, callee: object = Any) -> None:
        """Turn hooks that :meth:`disablehooks` turned off on again (for every call, or for ``callee``)."""
        self._switch_hooks(callee, False)

    def _switch_hooks(self, callee: object, off: bool) -> None:
        key = Any if callee is Any else self._key(callee)
        if bool(self._hooks_off.get(key)) != off:
            label = "every call" if callee is Any else callee_name(callee)
            self._reshape(
                f"{self!r}: hooks {'off' if off else 'on'} for {label}",
                lambda: self._hooks_off.__setitem__(key, off),
            )
