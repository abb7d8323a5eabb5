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

import types as pytypes

import wrapt

from . import world
from .registry import MethodTable, methods_from
from .rewrite import is_overdubbable

__all__ = ["Context", "BaseContext", "TargetRoot", "CPU", "CUDA", "when_imported", "callee_key"]


def callee_key(callee):
    """How overdub tables name a callee: a plain function by its qualified name (so an overdub survives the
    function's redefinition), anything else by identity."""
    if isinstance(callee, pytypes.FunctionType):
        return (callee.__module__, callee.__qualname__)
    return callee


def callee_name(callee) -> str:
    return getattr(callee, "__qualname__", None) or getattr(callee, "__name__", None) or repr(callee)


class Context:
    """A named table of overdubs, optionally inheriting from a parent context."""

    overdubbable = True     # False only for a target's root, which holds no overdubs

    def __init__(self, name: str, parent: "Context | None" = None):
        self.name = name
        self.parent = parent
        self._tables: dict = {}
        self._forwards: dict = {}
        self._replacements: dict = {}

    # -- defining overdubs -----------------------------------------------------------------------------
    def overdub(self, callee):
        """Decorator: add the def as an overdub method for ``callee`` in this context.

        ``callee`` may be a generic function, a plain Python function, a builtin (``print``), a module
        function (``math.sin``) or an intrinsic (``od.unsafe_store``). The method dispatches on its
        annotations like a generic method; inside it, calls run one context down.
        """
        if not is_overdubbable(callee):
            raise TypeError(f"{callee!r} cannot be overdubbed: contexts substitute functions, not classes or "
                            f"types, and numba requires len to stay the builtin")

        def define(func):
            for method in methods_from(f"{self.name}.overdub({callee_name(callee)})", func):
                self.table(callee).add(method)
            return func
        return define

    def table(self, callee) -> MethodTable:
        """The overdub table for ``callee`` (empty until an overdub is added; lookups in it are edges too)."""
        key = callee_key(callee)
        table = self._tables.get(key)
        if table is None:
            with world.lock:
                table = self._tables.setdefault(key, MethodTable(f"{self.name}.overdub({callee_name(callee)})"))
        return table

    def forward(self, callee, to) -> None:
        """Make calls of ``callee`` that no overdub takes mean calls of ``to`` (``print`` -> ``cuprintln``)."""
        self._forwards[callee_key(callee)] = to

    def forwarded(self, callee):
        return self._forwards.get(callee_key(callee))

    def replace(self, obj, replacement) -> None:
        """Make the object ``obj`` mean ``replacement`` wherever a kernel names it (a target's kernel idiom)."""
        self._replacements[id(obj)] = (obj, replacement)

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

    def overdub(self, callee):
        raise TypeError(f"{self.name} is a target's root: add overdubs to od.{self.name.upper()} instead")


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
