"""Methods added to existing callables: ``@od.method(f)`` (Julia's ``Base.:+(a::Dual, b::Dual) = ...``).

Julia extends any function by adding a method to its table. A Python callable -- ``operator.add``,
``abs``, ``math.sin``, a numba-cuda device function -- has no table, so overdub keeps one for it here, keyed
like a context's overdub tables (:func:`~overdub.context.callee_key`: a function at a module's top level by
its module and qualified name, anything else by identity). A generic function has a table of its own, so a
method for it is simply defined there.

A call inside a kernel asks the context chain first, then this table, then the callee itself
(:func:`overdub.resolve.resolve_call`): a call whose argument types a user method applies to reaches it;
every other call reaches the original, compiled exactly as before. The tables are ordinary method tables,
so a redefinition or a more specific method invalidates what relied on the old answer, and "no method for
these types" is an edge too.
"""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from typing import Any

from . import world
from .registry import GenericFunction, MethodTable, methods_from, reference_to
from .types import callee_key, callee_name, is_overdubbable

__all__ = ["method", "table", "user_methods", "UserMethods"]


class UserMethods:
    """The tables of methods added to callables that are not generic functions, one a callee."""

    def __init__(self) -> None:
        self._tables: dict[object, MethodTable] = {}  # callee key -> the table of methods added to that callee
        self._namespaces: dict[int, dict[str, Any]] = {}  # keeps the module namespaces named by callee keys alive

    def __reduce__(self) -> tuple[Any, ...]:
        return reference_to(self, __name__, "user_methods")

    def overdub_tables(self) -> list[tuple[object, MethodTable]]:
        """Its tables with methods, each with its callee (as a context's: what :mod:`overdub.travel` ships)."""
        return [(table.owner[1], table) for table in self._tables.values() if table.methods]  # type: ignore[index]

    def table(self, callee: Callable[..., Any]) -> MethodTable:
        """The table of methods added to ``callee`` (empty until one is; lookups in it are edges too)."""
        key = callee_key(callee)
        found = self._tables.get(key)
        if found is None:
            with world.lock:
                if isinstance(callee, pytypes.FunctionType):
                    self._namespaces[id(callee.__globals__)] = callee.__globals__
                found = self._tables.setdefault(key, MethodTable(callee_name(callee), owner=(self, callee)))
        return found


user_methods = UserMethods()
table = user_methods.table


def method(
    callee: Callable[..., Any], sig: tuple[Any, ...] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: add the def as a method of ``callee`` for the argument types its annotations (or ``sig``)
    give -- ``callee`` may be any callable a kernel can call: a generic function (the same as defining a
    method of it), ``operator.add`` (so ``a + b`` reaches it), ``operator.getitem`` (``a[i]``), ``abs``,
    ``math.sin``, a numba-cuda device function.

    Calls whose argument types no added method applies to reach ``callee`` itself, unchanged. Returns the
    generic function for a generic function, else the def.
    """
    if isinstance(callee, type):
        raise TypeError(
            f"od.method({callee.__qualname__}): {callee.__qualname__} is a class; add methods to a "
            f"function (a struct's constructor is its class, and its operators are dunders)"
        )
    if not is_overdubbable(callee):
        raise TypeError(
            f"od.method({callee!r}): only functions can gain methods"
            + (" (numba requires len to stay the builtin)" if callee is len else "")
        )

    def define(func: Callable[..., Any]) -> Callable[..., Any]:
        if not isinstance(func, pytypes.FunctionType):
            raise TypeError(f"od.method({callee_name(callee)}) takes a def, not {type(func).__name__}")
        if isinstance(callee, GenericFunction):
            callee.define(func, sig)
            return callee
        for added in methods_from(callee_name(callee), func, sig):
            table(callee).add(added)
        return func

    return define
