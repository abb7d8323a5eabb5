"""Operator dunders of a class (``__add__``, ``__radd__``, ``__neg__``, ``__lt__``, ``__getitem__``...) as
methods of the operator functions, with Python's reflected-operand rule.

``a + b`` in a kernel is a call of ``operator.add`` (:mod:`overdub.operators`). After the context chain and
the methods added with ``od.method``, such a call asks two tables of ``operator.add`` here: the *forward*
one, holding each registered class's ``__add__`` as a method ``(Self, other)``, then the *reflected* one,
holding each ``__radd__`` as a method ``(other, Self)``. So the left operand's ``__add__`` wins where its
annotations accept the right operand, and the right operand's ``__radd__`` is tried where it does not (or
does not exist) -- Python's rule, decided on types at compile time instead of by ``NotImplemented`` at run
time. ``Self`` is the lattice type of the class's values, given by whoever registers it (``od.struct``).

The tables are method tables: redefining a class (a new class, a new type) or adding a dunder invalidates
like any method, and an empty table is an edge of the operator rewrite.
"""

from __future__ import annotations

import operator
import types as pytypes
import typing
from collections.abc import Callable, Mapping

from . import world
from .registry import Method, MethodTable, Reference, methods_from, reference_to
from .types import LatticeType

__all__ = ["register", "tables", "FORWARD", "REFLECTED", "UNARY"]

# dunder -> operator function, for binary operators: forward and reflected names
FORWARD: dict[str, Callable[..., object]] = {
    "__add__": operator.add,
    "__sub__": operator.sub,
    "__mul__": operator.mul,
    "__truediv__": operator.truediv,
    "__floordiv__": operator.floordiv,
    "__mod__": operator.mod,
    "__pow__": operator.pow,
    "__matmul__": operator.matmul,
    "__lshift__": operator.lshift,
    "__rshift__": operator.rshift,
    "__and__": operator.and_,
    "__or__": operator.or_,
    "__xor__": operator.xor,
    "__lt__": operator.lt,
    "__le__": operator.le,
    "__gt__": operator.gt,
    "__ge__": operator.ge,
    "__eq__": operator.eq,
    "__ne__": operator.ne,
    "__iadd__": operator.iadd,
    "__isub__": operator.isub,
    "__imul__": operator.imul,
    "__itruediv__": operator.itruediv,
    "__ifloordiv__": operator.ifloordiv,
    "__imod__": operator.imod,
    "__ipow__": operator.ipow,
    "__getitem__": operator.getitem,
    "__setitem__": operator.setitem,
    "__contains__": operator.contains,
}
REFLECTED: dict[str, Callable[..., object]] = {
    "__radd__": operator.add,
    "__rsub__": operator.sub,
    "__rmul__": operator.mul,
    "__rtruediv__": operator.truediv,
    "__rfloordiv__": operator.floordiv,
    "__rmod__": operator.mod,
    "__rpow__": operator.pow,
    "__rmatmul__": operator.matmul,
    "__rlshift__": operator.lshift,
    "__rrshift__": operator.rshift,
    "__rand__": operator.and_,
    "__ror__": operator.or_,
    "__rxor__": operator.xor,
    # comparisons reflect into their mirror: a < b falls back to b > a
    "__gt__": operator.lt,
    "__ge__": operator.le,
    "__lt__": operator.gt,
    "__le__": operator.ge,
    "__eq__": operator.eq,
    "__ne__": operator.ne,
}
UNARY: dict[str, Callable[..., object]] = {
    "__neg__": operator.neg,
    "__pos__": operator.pos,
    "__invert__": operator.invert,
    "__abs__": abs,
}


class DunderTables:
    """One kind of dunder table per operator (forward or reflected): a variable of this module, so that its
    tables -- each owned by (it, the operator) -- are found by name in another process (the disk cache)."""

    def __init__(self, kind: str, variable: str) -> None:
        self.kind, self._variable = kind, variable
        self._tables: dict[Callable[..., object], MethodTable] = {}  # operator -> its table

    def __reduce__(self) -> Reference:
        return reference_to(self, __name__, self._variable)

    def table(self, op: Callable[..., object]) -> MethodTable:
        found = self._tables.get(op)
        if found is None:
            with world.lock:
                name = getattr(op, "__name__", repr(op))
                found = self._tables.setdefault(op, MethodTable(f"{name} ({self.kind} dunders)", owner=(self, op)))
        return found


forward_dunders = DunderTables("forward", "forward_dunders")
reflected_dunders = DunderTables("reflected", "reflected_dunders")


_HAS_FORWARD = frozenset(FORWARD.values()) | frozenset(UNARY.values())
_HAS_REFLECTED = frozenset(REFLECTED.values())


def tables(op: Callable[..., object]) -> list[MethodTable]:
    """The dunder tables a call of ``op`` asks, in order: forward (and unary), then reflected; none for a
    callee no dunder names."""
    return ([forward_dunders.table(op)] if op in _HAS_FORWARD else []) + (
        [reflected_dunders.table(op)] if op in _HAS_REFLECTED else []
    )


def _swapped(func: Callable[..., typing.Any], name: str) -> pytypes.FunctionType:
    """``(other, self) -> func(self, other)``: a reflected dunder as a method of the operator."""
    namespace: dict[str, typing.Any] = {"__overdub_dunder": func, "__name__": func.__module__}
    exec(
        compile(
            "def reflected(other, self):\n    return __overdub_dunder(self, other)\n", f"<reflected {name}>", "exec"
        ),
        namespace,
    )
    wrapper: pytypes.FunctionType = namespace["reflected"]
    wrapper.__qualname__ = func.__qualname__
    wrapper.__overdub_origin__ = func  # type: ignore[attr-defined]  # a function takes any attribute
    return wrapper


def register(cls: type, self_type: LatticeType, members: Mapping[str, object] | None = None) -> None:
    """Add the operator dunders defined in ``cls``'s body (or those of ``members``, given to it later) as
    methods whose first parameter (``self``) is ``self_type`` -- the lattice type of the class's values -- and
    whose others keep their annotations; a string annotation naming the class (``other: "Dual"``) means
    ``cls`` itself, even while the name is still bound to an earlier class of that name or to nothing."""
    scope = {cls.__name__: cls}
    for name, func in (vars(cls) if members is None else members).items():
        if not callable(func) or not hasattr(func, "__code__"):
            continue
        label = f"{cls.__qualname__}.{name}"
        if name in FORWARD or name in UNARY:
            arity = 1 if name in UNARY else 3 if name == "__setitem__" else 2
            _add(
                forward_dunders.table(FORWARD.get(name) or UNARY[name]),  # name is in one of them
                _method(label, func, self_type, scope, arity),
            )
        if name in REFLECTED:
            _add(reflected_dunders.table(REFLECTED[name]), _method(label, func, self_type, scope, 2, reflect=True))


def _add(table: MethodTable, method: Method | None) -> None:
    if method is not None:
        table.add(method)


def _method(
    label: str,
    func: Callable[..., typing.Any],
    self_type: LatticeType,
    scope: Mapping[str, object],
    arity: int,
    reflect: bool = False,
) -> Method | None:
    """The method of a dunder taking ``arity`` operands (``__pow__(self, other, mod=None)`` is binary), with
    ``self`` typed ``self_type``: ``(self, other)``, or ``(other, self)`` when reflected; None when the
    dunder cannot take that many or its annotations are no lattice types (it stays a host-only dunder)."""
    try:
        methods = methods_from(label, func, scope=scope)
    except TypeError:  # annotated for the host only (other: object): not a device method
        return None
    for method in methods:
        if len(method.sig) != arity:
            continue
        method.sig = (self_type,) + method.sig[1:]
        if reflect:
            method.sig, method.params = method.sig[::-1], method.params[::-1]
            method.func = _swapped(method.func, label)
        return method
    return None
