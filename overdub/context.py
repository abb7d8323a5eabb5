"""Contexts: tables of overdubs that a kernel is compiled in.

A :class:`Context` maps callees to overdub method tables. A kernel launched in a user context is compiled in
the *chain* user context -> its parents -> the target's base context (:data:`CPU` or :data:`CUDA`) -> the
callee itself; each call asks the chain in that order and the first context with an applicable overdub wins.
An overdub method's own body is compiled one context down (the chain after the context it came from), the
way PyTorch's dispatch modes pop themselves while their handler runs: calling ``f`` inside ``f``'s overdub
reaches the next implementation.

Libraries extend contexts -- ``od.CPU`` and ``od.CUDA`` too -- by registering overdubs from their own
modules; :func:`when_imported` runs such registrations once the library they target is imported.
"""
from __future__ import annotations

import sys
import types as pytypes

import wrapt

from . import world
from .registry import MethodTable, methods_from, reference_to
from .rewrite import is_overdubbable

__all__ = ["Context", "BaseContext", "TargetRoot", "CPU", "CUDA", "when_imported", "callee_key"]


def callee_key(callee):
    """How overdub tables name a callee: a function defined at a module's top level by its module namespace
    and qualified name (so an overdub survives the function's redefinition, as a Julia overdub survives a
    method's); a lambda, a closure or anything else by identity (two lambdas of a module are two callees)."""
    if isinstance(callee, pytypes.FunctionType) and "<" not in callee.__qualname__:
        return (id(callee.__globals__), callee.__qualname__)
    return callee


def callee_name(callee) -> str:
    return getattr(callee, "__qualname__", None) or getattr(callee, "__name__", None) or repr(callee)


class ContextShape(world.Node):
    """What a context is made of besides its overdub tables -- its parent, forwards and replacements -- as
    an edge: changing any of them invalidates what was compiled in a chain through the context."""

    __slots__ = ("context",)

    def __init__(self, context: "Context"):
        super().__init__()
        self.context = context

    def describe(self) -> str:
        return f"the parent, forwards and replacements of {self.context!r}"


class Context:
    """A named table of overdubs, optionally inheriting from a parent context.

    Its parent, forwards and replacements may change at any time; whatever was compiled in a chain through
    the context recompiles on its next launch.
    """

    overdubbable = True     # False only for a target's root, which holds no overdubs

    def __init__(self, name: str, parent: "Context | None" = None):
        self.name = name
        self.__module__ = sys._getframe(1).f_globals.get("__name__")     # where it is made: for pickling
        self._parent = parent
        self._tables: dict = {}
        self._forwards: dict = {}
        self._replacements: dict = {}
        self._namespaces: dict = {}       # keeps the module namespaces named by callee keys alive
        self.shape = ContextShape(self)

    def __reduce__(self):
        """By reference: the module-level variable of the module it was made in that holds it."""
        module = sys.modules.get(self.__module__)
        names = [name for name, value in vars(module).items() if value is self] if module else []
        return reference_to(self, self.__module__, names[0] if names else self.name)

    @property
    def parent(self) -> "Context | None":
        return self._parent

    @parent.setter
    def parent(self, parent: "Context | None") -> None:
        self._reshape(f"parent of {self!r} set to {parent!r}", lambda: setattr(self, "_parent", parent))

    def _reshape(self, cause: str, change) -> None:
        with world.lock:
            change()
            world.bump_world()
            stale, self.shape = self.shape, ContextShape(self)
            world.invalidate([stale], cause)

    def _key(self, callee):
        if isinstance(callee, pytypes.FunctionType):
            self._namespaces[id(callee.__globals__)] = callee.__globals__
        return callee_key(callee)

    # -- defining overdubs -----------------------------------------------------------------------------
    def overdub(self, callee):
        """Decorator: add the def as an overdub method for ``callee`` in this context.

        ``callee`` may be a generic function, a plain Python function, a builtin (``print``), a module
        function (``math.sin``) or an intrinsic (``od.unsafe_store``). The method dispatches on its
        annotations like a generic method; inside it, calls run one context down.
        """
        if isinstance(callee, type):
            raise TypeError(f"{self.name}.overdub({callee.__qualname__}): {callee.__qualname__} is a class; "
                            f"contexts substitute calls of functions -- overdub a function that constructs or "
                            f"converts instead")
        if not is_overdubbable(callee):
            raise TypeError(f"{self.name}.overdub({callee!r}): only functions can be overdubbed"
                            + (" (numba requires len to stay the builtin)" if callee is len else ""))

        def define(func):
            for method in methods_from(f"{self.name}.overdub({callee_name(callee)})", func):
                self.table(callee).add(method)
            return func
        return define

    def table(self, callee) -> MethodTable:
        """The overdub table for ``callee`` (empty until an overdub is added; lookups in it are edges too)."""
        key = self._key(callee)
        table = self._tables.get(key)
        if table is None:
            with world.lock:
                table = self._tables.setdefault(key, MethodTable(f"{self.name}.overdub({callee_name(callee)})",
                                                                 owner=(self, callee)))
        return table

    def forward(self, callee, to) -> None:
        """Make calls of ``callee`` that no overdub takes mean calls of ``to`` (``print`` -> ``cuprintln``)."""
        key = self._key(callee)
        self._reshape(f"{self!r} forwards {callee_name(callee)} to {callee_name(to)}",
                      lambda: self._forwards.__setitem__(key, to))

    def forwarded(self, callee):
        return self._forwards.get(callee_key(callee))

    def replace(self, obj, replacement) -> None:
        """Make the object ``obj`` mean ``replacement`` wherever a kernel names it (a target's kernel idiom)."""
        self._reshape(f"{self!r} replaces {callee_name(obj)}",
                      lambda: self._replacements.__setitem__(id(obj), (obj, replacement)))

    def replacement(self, obj):
        entry = self._replacements.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    # -- chains ----------------------------------------------------------------------------------------
    def chain(self, target) -> tuple["Context", ...]:
        """This context, its parents, the target's base context (other targets' base contexts are
        skipped), then the target's root."""
        base = target.base
        chain, ctx = [], self
        while ctx is not None:
            if not isinstance(ctx, BaseContext) or ctx is base:
                chain.append(ctx)
            ctx = ctx.parent
        if chain[-1] is not base:
            chain.append(base)
        chain.append(target.root)
        return tuple(chain)

    def __repr__(self) -> str:
        return f"Context({self.name!r})"


class TargetRoot(Context):
    """The end of every chain of a target: no overdubs (so never popped), only the target's fixed meaning
    of names -- its forwards (``print`` -> ``cuprintln``) and replacements (the CUDA kernel idiom on the CPU).
    """

    overdubbable = False

    def __init__(self, name: str, target):
        super().__init__(name)
        self.target = target

    def configured_for(self, target) -> "TargetRoot":
        """The root of ``target``, a configuration of this root's target: the same meaning of names."""
        root = TargetRoot(f"{self.name}[{target.options.describe()}]", target)
        root._forwards, root._replacements = dict(self._forwards), dict(self._replacements)
        root._namespaces = dict(self._namespaces)
        return root

    def overdub(self, callee):
        base = "od.CUDA" if self.target.name == "cuda" else "od.CPU"
        raise TypeError(f"the root of the {self.target.label} target holds no overdubs: add them to {base}, "
                        f"or to a context of your own")


class BaseContext(Context):
    """A target's own context (``od.CPU``, ``od.CUDA``): the last one asked before the callee itself.

    Libraries extend it with overdubs like any other context.
    """


CPU = BaseContext("CPU")
CUDA = BaseContext("CUDA")


def when_imported(module_name: str):
    """Decorator: run ``hook(module)`` once ``module_name`` is imported (now, if it already is).

    Lets a library register its overdubs for another library lazily, without importing it.
    """
    def register(hook):
        wrapt.register_post_import_hook(hook, module_name)
        return hook
    return register
