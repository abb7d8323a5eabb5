"""Which method tables a call asks, and in which order: the one answer that dispatch during typing
(:mod:`overdub.resolve`), the operator rewrite (:mod:`overdub.operators`) and the CPU target's bounds guard
(:mod:`overdub.targets.cpu.guard`) share.

A call of ``f`` in a context chain asks, in turn:

1. each context's overdub table for ``f``, from the launch's context down to the target's base context (the
   chain's root holds none); an overdub found in the context at depth ``d`` compiles in the chain below it,
   so that calling ``f`` inside it reaches the next implementation;
2. unless ``f`` is a generic function (its added methods are in its own table), the methods added to ``f``
   with ``od.method`` (:mod:`overdub.extending`);
3. for an operator, the dunders of its operands' classes: forward (``__add__``), then reflected
   (``__radd__``) (:mod:`overdub.dunders`).

Methods of 2 and 3 compile in the whole chain. After the tables (and not tables): the chain's forwards
(``print`` -> ``cuprintln``), then the callee itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from . import dunders
from .extending import user_methods
from .registry import GenericFunction, MethodTable

if TYPE_CHECKING:
    from .context import Context

__all__ = ["Asked", "asked"]


class Asked(NamedTuple):
    """One table a call asks: the table, the chain a method found there compiles in, and whether it is a
    context's overdub table (else methods added to the callee, or its operands' dunders)."""

    table: MethodTable
    below: tuple[Context, ...]
    overdub: bool


def asked(chain: tuple[Context, ...], callee: Callable[..., object]) -> list[Asked]:
    """Every table a call of ``callee`` in ``chain`` asks, in order (see the module docstring)."""
    found = []
    for depth, ctx in enumerate(chain):
        if not ctx.overdubbable:
            break
        found.append(Asked(ctx.table(callee), chain[depth + 1 :], True))
    if not isinstance(callee, GenericFunction):
        found += [Asked(table, chain, False) for table in [user_methods.table(callee), *dunders.tables(callee)]]
    return found
