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

import inspect
import sys
import types as pytypes
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NoReturn, TypeVar, cast
from typing import Any as Arbitrary

from . import postimport, world
from .registry import Method, MethodError, MethodTable, methods_from, reference_to
from .rewrite import is_overdubbable
from .runtime import runtime
from .types import (
    Any,
    Callee,
    CalleePattern,
    CalleeType,
    LatticeType,
    as_type,
    callee_key,
    callee_name,
    issubtype,
    subtype,
    type_name,
)

if TYPE_CHECKING:
    from numba.core import types as nt

    from .targets import Target

__all__ = [
    "Context",
    "BaseContext",
    "TargetRoot",
    "Stack",
    "stacked",
    "when_imported",
    "callee_key",
]

_F = TypeVar("_F", bound=Callable[..., Arbitrary])  # a def a decorator registers, and returns as it is
_H = TypeVar("_H", bound=postimport.Hook)


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


class ContextShape(world.Node):
    """What a context is made of besides its overdub tables -- its parent, forwards and replacements -- as
    an edge: changing any of them invalidates what was compiled in a chain through the context."""

    __slots__ = ("context",)

    def __init__(self, context: Context):
        super().__init__()
        self.context = context

    def describe(self) -> str:
        return f"the parent, forwards, replacements and catch-all hooks of {self.context!r}"


PREHOOK, POSTHOOK = "prehook", "posthook"


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


_every_context: weakref.WeakSet[Context] = weakref.WeakSet()
runtime.register_cache(f"{__name__}._every_context", _every_context, kept="definitions, not a cache")


def every_context() -> list[Context]:
    """The contexts alive in this process, in no particular order."""
    return list(_every_context)


class Context:
    """A named table of overdubs, optionally inheriting from a parent context.

    Its parent, forwards and replacements may change at any time; whatever was compiled in a chain through
    the context recompiles on its next launch.
    """

    overdubbable = True  # False only for a target's root, which holds no overdubs

    def __init__(self, name: str, parent: Context | None = None, state: object = None) -> None:
        self.name = name
        # where it is made: for pickling (a module's name; None only for code run with no __name__)
        self.__module__ = cast(str, sys._getframe(1).f_globals.get("__name__"))
        self._parent = parent
        self._state: LatticeType | None = None if state is None else as_type(state)
        self._tables: dict[object, MethodTable] = {}  # callee key -> its overdub table
        self._hook_tables: dict[tuple[str, object], MethodTable] = {}  # (PREHOOK or POSTHOOK, callee key) -> table
        # (PREHOOK or POSTHOOK, callee key, callee pattern) -> an *args hook's Method
        self._catch_all: dict[tuple[str, object, LatticeType], Method] = {}
        self._observes: set[str] = set()  # the kinds of hooks ever defined here (others are not looked up)
        self._hooks_off: dict[object, bool] = {}  # callee key (od.Any: every call) -> are its hooks off?
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
            world.invalidate([stale], cause)

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

    # -- hooks -----------------------------------------------------------------------------------------
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


class TargetRoot(Context):
    """The end of every chain of a target: no overdubs (so never popped), only the target's fixed meaning
    of names -- its forwards (``print`` -> ``cuprintln``) and replacements (the CUDA kernel idiom on the CPU).
    """

    overdubbable = False
    state: nt.Type | None = None  # the numba type of the state launches in chains ending here pass, if any

    def __init__(self, name: str, target: Target) -> None:
        super().__init__(name)
        self.target = target
        self._with_state: dict[nt.Type, StateRoot] = {}  # state type -> this root for launches passing it
        self._hidden: dict[int, object] = {}  # id(callee) -> callee

    def hide(self, *callees: object) -> None:
        """Keep calls of ``callees`` -- the target's stand-ins for what is no function on other targets (the
        CPU target's ``cuda.atomic.add``, ``cuda.local.array``) -- out of what hooks observe, so that a hook of
        ``od.Any`` observes the same calls on every target."""
        self._hidden.update((id(callee), callee) for callee in callees)

    def hides(self, callee: object) -> bool:
        return self._hidden.get(id(callee)) is callee

    def with_state(self, state_type: nt.Type) -> StateRoot:
        """This root for launches passing state of the numba type ``state_type``: what is compiled for them
        takes it as a hidden first parameter, so it is compiled apart (one compile per state type)."""
        root = self._with_state.get(state_type)
        if root is None:
            with world.lock:
                root = self._with_state.setdefault(state_type, StateRoot(self, state_type))
        return root

    def add_imported(
        self, forwards: Iterable[tuple[object, object]] = (), replacements: Iterable[tuple[object, object]] = ()
    ) -> None:
        """Add forwards -- ``(callee, to)`` pairs -- and replacements -- ``(obj, replacement)`` pairs -- of the
        objects of a module being imported, from its post-import hook (:func:`when_imported`), without
        reshaping the root. Until the module is imported no code can name its objects, so nothing compiled
        so far depends on what they mean here, and nothing recompiles: a reshape would recompile every kernel
        of the target. (The CPU target's meaning of numba-cuda's kernel idiom, added once a program imports
        numba-cuda: a program that never names it does not wait for its import.)"""
        for callee, to in forwards:
            self._forwards[self._key(callee)] = to
        for obj, replacement in replacements:
            self._replacements[id(obj)] = (obj, replacement)

    def configured_for(self, target: Target) -> TargetRoot:
        """The root of ``target``, a configuration of this root's target: the same meaning of names -- the
        very tables, so that what this root adds later (:meth:`add_imported`) every configuration means too."""
        root = TargetRoot(f"{self.name}[{target.options.describe()}]", target)
        root._forwards, root._replacements = self._forwards, self._replacements
        root._namespaces, root._hidden = self._namespaces, self._hidden
        return root

    def overdub(self, callee: Callable[..., Arbitrary]) -> NoReturn:
        raise TypeError(
            f"the root of the {self.target.label} target holds no overdubs: add them to od.{self.target.base.name}, "
            f"or to a context of your own"
        )


class StateRoot(TargetRoot):
    """A target's root for launches passing state of one numba type: the root's meaning of names, and the
    state's type."""

    def __init__(self, root: TargetRoot, state_type: nt.Type) -> None:
        Context.__init__(self, f"{root.name}[state {state_type}]")
        self.target, self.state, self.root = root.target, state_type, root

    @property
    def shape(self) -> ContextShape:
        return self.root.shape

    # set once by Context.__init__; the root's shape is the one that changes
    @shape.setter
    def shape(self, node: ContextShape) -> None:
        pass

    def forwarded(self, callee: object) -> object:
        return self.root.forwarded(callee)

    def replacement(self, obj: object) -> object:
        return self.root.replacement(obj)

    def hides(self, callee: object) -> bool:
        return self.root.hides(callee)

    def forward(self, callee: object, to: object) -> None:
        self.root.forward(callee, to)

    def replace(self, obj: object, replacement: object) -> None:
        self.root.replace(obj, replacement)


class BaseContext(Context):
    """A target's own context (``od.CPU``, ``od.CUDA``): the last one asked before the callee itself.

    Libraries extend it with overdubs like any other context.
    """


class Stack(Context):
    """Several contexts used together, as if stacked (``od.cuda(..., context=(ad, checking))``): a call asks the
    first, its parents, then the second and its parents, ... then the target's own context -- each context
    appears once, where it first does. An overdub's body runs one level down the stack (the contexts after
    its own), so an overdub of ``f`` in the first context that calls ``f`` reaches the second's overdub of
    ``f``: of two contexts overdubbing the same callee, the one listed first wins and may delegate. Hooks of
    every context fire. At most one of them may declare state (the launch's ``state=``). One stack per tuple
    of contexts: its compiled code is cached and invalidated as a single context's."""

    def __init__(self, contexts: tuple[Context, ...]) -> None:
        super().__init__("+".join(ctx.name for ctx in contexts))
        self.__module__ = __name__
        self.contexts = contexts
        declared = [ctx for ctx in contexts if ctx.state is not None]
        if len(declared) > 1:
            raise TypeError(
                f"context={contexts!r}: {declared[0]!r} and {declared[1]!r} both declare device state; a launch "
                f"passes one state, so at most one context of a stack may declare it"
            )
        self._state = declared[0].state if declared else None

    def __reduce__(self) -> tuple[object, ...]:
        return stacked, (self.contexts,)

    def chain(self, target: Target, state: object = None) -> tuple[Context, ...]:
        members: list[Context] = []
        for ctx in self.contexts:
            for member in ctx.chain(target, state)[:-2]:  # without the target's own context and root
                if member not in members:
                    members.append(member)
        root = target.root if state is None else target.root.with_state(cast("nt.Type", state))
        return (self, *members, target.base, root)

    def __repr__(self) -> str:
        return f"Stack({', '.join(map(repr, self.contexts))})"


# how a context of the user's code travels by value (set by overdub.travel; None: by reference)
reduce_context = None

_stacks: dict[tuple[Context, ...], Stack] = {}
runtime.register_cache(f"{__name__}._stacks", _stacks, kept="a stack is a definition: its kernels are keyed by it")


def stacked(contexts: tuple[Context, ...]) -> Stack:
    """The one :class:`Stack` of these contexts (in this order)."""
    stack = _stacks.get(contexts)
    if stack is None:
        for ctx in contexts:
            if not isinstance(ctx, Context):
                raise TypeError(f"context=(...) takes contexts, not {type(ctx).__name__} {ctx!r:.60}")
        with world.lock:
            stack = _stacks.setdefault(contexts, Stack(contexts))
    return stack


def resolve(context: Context | tuple[Context, ...] | None) -> Context | None:
    """A launch's ``context=``: a context, None, or a tuple of contexts (their stack)."""
    if isinstance(context, tuple):
        return stacked(context) if len(context) > 1 else (context[0] if context else None)
    return context


def when_imported(module_name: str) -> Callable[[_H], _H]:
    """Decorator: run ``hook(module)`` once ``module_name`` is imported (now, if it already is).

    Lets a library register its overdubs for another library lazily, without importing it
    (:mod:`overdub.postimport`).
    """

    def register(hook: _H) -> _H:
        postimport.when_imported(module_name, hook)
        return hook

    return register
