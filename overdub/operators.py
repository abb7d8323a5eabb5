"""Operators in kernels are calls: ``a + b`` is ``operator.add(a, b)``, ``a[i] = v`` is
``operator.setitem(a, i, v)``, ``-a`` is ``operator.neg(a)``, ``a += b`` is ``operator.iadd(a, b)``.

numba types and lowers operators itself -- binop, unary, getitem and setitem nodes of its IR -- so neither a
context's overdub of ``operator.getitem`` nor a method added to ``operator.add`` would ever see them. This
pass, registered before type inference with numba's and numba-cuda's rewrite registries (numba-cuda's once a
program imports it), turns each operator node of a function overdub compiled (the rewrite marks its clones:
:data:`~overdub.rewrite.CHAIN_MARK` in their globals) into a call of an :class:`OperatorSite`: an Overdubbed
callee, so numba's typing of the call is :func:`overdub.resolve.resolve_call` -- the chain's overdubs, then
methods added with ``od.method``, then dunders, then numba's own typing of the operator, done as numba types
that node (:func:`numba_signature`).

Two things keep the code numba generates for built-in types exactly what it was:

* an operator is rerouted only where some table could apply: while every table of the operator in the chain
  is empty the node stays numba's (the emptiness is an edge: the first method or overdub of ``+``
  recompiles what relied on it); an operation on two constants stays numba's too, so branch pruning on
  ``if N == 2`` still happens;
* a call that numba's own typing resolved is turned back, after type inference, into the very node it came
  from (:class:`restore pass <_Restore>`), so numba lowers it as before: a heterogeneous tuple's ``t[0]``
  through static_getitem, ``x ** 2`` through its static exponent, ``x += 1`` through ``+``.

numba internals, all here: the IR node classes of numba's and numba-cuda's IR modules (each pipeline has its
own), their rewrite registries -- the restore pass is put first in the after-inference list, ahead of
numba's string-literal getitem rewrite -- and the typing context's ``resolve_static_getitem`` /
``resolve_setitem`` / ``resolve_static_setitem``.
"""

from __future__ import annotations

import itertools
import operator
import typing
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import numba.core.errors
import numba.core.ir
import numba.core.rewrites
from numba.core import types
from numba.core.typing.templates import signature

from . import bridge, settings
from .rewrite import CHAIN_MARK, Overdubbed
from .tables import asked

if TYPE_CHECKING:
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from .context import Context

__all__ = ["OperatorSite", "numba_signature", "INPLACE", "join_pipeline"]

# Which operator nodes become calls is ``settings.REROUTE`` (``OVERDUB_REROUTE``): ``"when-extended"`` (those of
# operators some table of the chain has a method for), ``"always"`` or ``"never"`` (then operators reach no
# method or overdub). The last two exist to measure what rerouting costs and to check that it changes no code
# (``OVERDUB_REROUTE=always`` runs the test suite through the rerouted path); they are not an API. It decides
# which edges a kernel records, so the disk cache keys on it (settings.code_settings).

_Operator: TypeAlias = Callable[..., Any]  # an operator function: operator.add, operator.getitem, ...
# A node of a function's IR, numba's or numba-cuda's: each pipeline has its own IR module, two class hierarchies
# told apart by the _Nodes of the pipeline; the rewrites read them by attribute.
_IR: TypeAlias = Any
_Found: TypeAlias = "tuple[str, _Operator, list[_IR], dict[str, object]]"  # kind, operator, operands, constants

# Python's `is` cannot be overloaded; numba's branch pruning reads `x is None` nodes
_NEVER_REROUTED = frozenset({operator.is_, operator.is_not})

# a += b: the in-place operator, then (Python's fallback) the copying one
INPLACE: dict[_Operator, _Operator] = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
}


class OperatorSite(Overdubbed):
    """One operator node of a kernel, as a callee: ``callee`` is its operator function, ``kind`` the node
    (binop, inplace_binop, unary, getitem, static_getitem, setitem, static_setitem), ``constants`` what the
    node carries besides its operands (a static index, a static exponent). ``by_numba`` records the argument
    types numba's own typing resolved, whose calls are turned back into the node after type inference."""

    __slots__ = ("kind", "constants", "by_numba")
    observed = False  # hooks observe calls written as calls; a prehook of od.Any would see every + and a[i]
    kind: str
    constants: dict[str, object]
    by_numba: set[tuple[types.Type, ...]]

    def __init__(self, chain: tuple[Context, ...], callee: _Operator, kind: str, constants: dict[str, object]) -> None:
        super().__init__(chain, callee)
        self.kind, self.constants, self.by_numba = kind, constants, set()

    @property
    def operators(self) -> tuple[_Operator, ...]:
        """The operator functions a call dispatches on, in order: ``iadd`` then ``add`` for ``a += b``."""
        fallback = INPLACE.get(self.callee)
        return (self.callee,) if fallback is None else (self.callee, fallback)


def _may_apply(chain: tuple[Context, ...], ops: tuple[_Operator, ...]) -> bool:
    """Could any table apply to a call of one of ``ops``? (While not, every table's emptiness is an edge.)"""
    return not all(each.table.is_empty() for op in ops for each in asked(chain, op))


def numba_signature(site: OperatorSite, context: TypingContext, args: tuple[types.Type, ...]) -> Signature | None:
    """The signature numba's own typing gives the node ``site`` came from, or None (as numba's typeinfer
    types binop, unary, getitem, static_getitem, setitem and static_setitem nodes)."""
    kind, constants = site.kind, site.constants
    if kind == "static_getitem":
        static = context.resolve_static_getitem(value=args[0], index=constants["index"])  # type: ignore[no-untyped-call]  # numba's is unannotated
        if static is not None:
            sig: Signature = signature(static.return_type, *args)  # type: ignore[no-untyped-call]  # numba's is unannotated
            return sig
        return bridge.delegate(context, operator.getitem, args, {})[0]
    if kind == "setitem":
        setitem: Signature | None = context.resolve_setitem(*args)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return setitem
    if kind == "static_setitem":
        static_setitem: Signature | None = context.resolve_static_setitem(args[0], constants["index"], args[2]) or (  # type: ignore[no-untyped-call]  # numba's is unannotated
            context.resolve_setitem(*args)  # type: ignore[no-untyped-call]  # numba's is unannotated
        )
        return static_setitem
    return bridge.delegate(context, site.callee, args, {})[0]


# --- the rewrite before type inference --------------------------------------------------------------------


class _Nodes(NamedTuple):
    """The IR node classes a pipeline's rewrites meet, as isinstance checks take them: numba's own in numba's
    pipeline; in numba-cuda's, its own and numba's (its ``*_types`` tuples)."""

    setitem: tuple[type[_IR], ...]
    static_setitem: tuple[type[_IR], ...]
    assign: tuple[type[_IR], ...]
    expr: tuple[type[_IR], ...]
    global_: tuple[type[_IR], ...]


def _operator_of(stmt: _IR, nodes: _Nodes) -> _Found | None:
    """(kind, operator, operands, constants) of an operator statement, or None."""
    if isinstance(stmt, nodes.setitem):
        return "setitem", operator.setitem, [stmt.target, stmt.index, stmt.value], {}
    if isinstance(stmt, nodes.static_setitem):
        return "static_setitem", operator.setitem, [stmt.target, stmt.index_var, stmt.value], {"index": stmt.index}
    if not isinstance(stmt, nodes.assign) or not isinstance(stmt.value, nodes.expr):
        return None
    expr = stmt.value
    if expr.op == "binop" and expr.fn not in _NEVER_REROUTED:
        return "binop", expr.fn, [expr.lhs, expr.rhs], {"static_lhs": expr.static_lhs, "static_rhs": expr.static_rhs}
    if expr.op == "inplace_binop":
        return "inplace_binop", expr.fn, [expr.lhs, expr.rhs], {"immutable_fn": expr.immutable_fn}
    if expr.op == "unary":
        return "unary", expr.fn, [expr.value], {}
    if expr.op == "getitem":
        return "getitem", operator.getitem, [expr.value, expr.index], {}
    if expr.op == "static_getitem" and expr.index_var is not None:
        return "static_getitem", operator.getitem, [expr.value, expr.index_var], {"index": expr.index}
    return None


def _make_reroute(registry_module: ModuleType, ir: ModuleType, errors: ModuleType, nodes: _Nodes) -> type:
    class RerouteOperators(registry_module.Rewrite):  # type: ignore[name-defined, misc]  # the registry module's own Rewrite class
        """Operator nodes of a function overdub compiled become calls of OperatorSites (see the module)."""

        chain: tuple[Context, ...] | None
        found: dict[int, _Found]

        def __init__(self, state: object) -> None:
            super().__init__(state)
            self.open: dict[tuple[_Operator, ...], bool] = {}  # operator -> whether some table could apply

        def match(
            self, func_ir: _IR, block: _IR, typemap: dict[str, types.Type], calltypes: dict[_IR, Signature]
        ) -> bool:
            # the function's identity is the IR's: numba also runs these rewrites on closures' IR with a
            # pipeline state of its own (ir_utils.get_ir_of_code), whose globals are the enclosing function's
            func = getattr(getattr(func_ir, "func_id", None), "func", None)
            self.chain = getattr(func, "__globals__", {}).get(CHAIN_MARK)
            if self.chain is None:
                return False
            self.block, self.func_ir = block, func_ir
            self.found = {
                id(stmt): found
                for stmt in block.body
                if (found := _operator_of(stmt, nodes)) is not None and self._reroutes(*found)
            }
            return bool(self.found)

        def _reroutes(self, kind: str, op: _Operator, operands: list[_IR], constants: dict[str, object]) -> bool:
            reroute = settings.REROUTE.value()
            if reroute == "never" or (kind in ("binop", "unary") and all(self._constant(v) for v in operands)):
                return False
            if reroute == "always":
                return True
            ops = (op, INPLACE[op]) if kind == "inplace_binop" and op in INPLACE else (op,)
            if ops not in self.open:
                self.open[ops] = _may_apply(typing.cast("tuple[Context, ...]", self.chain), ops)  # match found one
            return self.open[ops]

        def _constant(self, var: _IR) -> bool:
            try:
                self.func_ir.infer_constant(var)
            except errors.ConstantInferenceError:
                return False
            return True

        def apply(self) -> _IR:
            new_block = self.block.copy()
            new_block.clear()
            for stmt in self.block.body:
                found = self.found.get(id(stmt))
                if found is None:
                    new_block.append(stmt)
                    continue
                kind, op, operands, constants = found
                scope, loc = self.block.scope, stmt.loc
                # a name no other site has, in this IR or a copy of it (literal_unroll's subpipeline reroutes the
                # copies of a loop's body again: scope.redefine's numbering restarted there, and two sites' names met)
                function = scope.redefine(f"$overdub_operator_{next(_site_numbers)}", loc)
                site = OperatorSite(
                    typing.cast("tuple[Context, ...]", self.chain), op, kind, constants
                )  # match found one
                new_block.append(ir.Assign(ir.Global(f"operator.{op.__name__}", site, loc), function, loc))
                target = stmt.target if isinstance(stmt, nodes.assign) else scope.redefine("$overdub_setitem", loc)
                new_block.append(ir.Assign(ir.Expr.call(function, operands, (), loc), target, loc))
            return new_block

    RerouteOperators.__qualname__ = f"RerouteOperators[{registry_module.__name__}]"
    return RerouteOperators


_site_numbers = itertools.count()  # the rerouted operator sites of this process, numbered


# --- the restore pass after type inference ----------------------------------------------------------------


def _restored(site: OperatorSite, call: _IR, ir: ModuleType) -> _IR:
    """The node ``site`` came from, on the call's (possibly renamed) operands."""
    c, args, loc = site.constants, call.args, call.loc
    if site.kind == "binop":
        expr = ir.Expr.binop(site.callee, args[0], args[1], loc)
        expr.static_lhs, expr.static_rhs = c["static_lhs"], c["static_rhs"]
        return expr
    if site.kind == "inplace_binop":
        return ir.Expr.inplace_binop(site.callee, c["immutable_fn"], args[0], args[1], loc)
    if site.kind == "unary":
        return ir.Expr.unary(site.callee, args[0], loc)
    if site.kind == "getitem":
        return ir.Expr.getitem(args[0], args[1], loc)
    if site.kind == "static_getitem":
        return ir.Expr.static_getitem(args[0], c["index"], args[1], loc)
    if site.kind == "setitem":
        return ir.SetItem(args[0], args[1], args[2], loc)
    return ir.StaticSetItem(args[0], c["index"], args[1], args[2], loc)


def _make_restore(registry_module: ModuleType, ir: ModuleType, nodes: _Nodes) -> type:
    class RestoreOperators(registry_module.Rewrite):  # type: ignore[name-defined, misc]  # the registry module's own Rewrite class
        """Calls of OperatorSites that numba's own typing resolved become the nodes they came from again."""

        def match(
            self, func_ir: _IR, block: _IR, typemap: dict[str, types.Type], calltypes: dict[_IR, Signature]
        ) -> bool:
            self.block, self.calltypes = block, calltypes
            self.sites: dict[int, OperatorSite] = {}
            for stmt in block.body:
                site = self._site(stmt, typemap)
                if site is not None:
                    self.sites[id(stmt)] = site
            return bool(self.sites)

        def _site(self, stmt: _IR, typemap: dict[str, types.Type]) -> OperatorSite | None:
            if not isinstance(stmt, nodes.assign) or not isinstance(stmt.value, nodes.expr) or stmt.value.op != "call":
                return None
            site = getattr(typemap.get(stmt.value.func.name), "site", None)
            sig = self.calltypes.get(stmt.value)
            if isinstance(site, OperatorSite) and sig is not None and tuple(sig.args) in site.by_numba:
                return site
            return None

        def apply(self) -> _IR:
            restored = {id(site) for site in self.sites.values()}
            new_block = self.block.copy()
            new_block.clear()
            for stmt in self.block.body:
                if (
                    isinstance(stmt, nodes.assign)
                    and isinstance(stmt.value, nodes.global_)
                    and id(stmt.value.value) in restored
                ):
                    continue  # the site's global: nothing reads it any more
                site = self.sites.get(id(stmt))
                if site is None:
                    new_block.append(stmt)
                    continue
                node = _restored(site, stmt.value, ir)
                self.calltypes[node] = self.calltypes.pop(stmt.value)
                new_block.append(ir.Assign(node, stmt.target, stmt.loc) if isinstance(node, nodes.expr) else node)
            return new_block

    RestoreOperators.__qualname__ = f"RestoreOperators[{registry_module.__name__}]"
    return RestoreOperators


def _register(registry_module: ModuleType, ir: ModuleType, errors: ModuleType, nodes: _Nodes) -> None:
    registry_module.register_rewrite("before-inference")(_make_reroute(registry_module, ir, errors, nodes))
    restore = _make_restore(registry_module, ir, nodes)
    registry_module.register_rewrite("after-inference")(restore)
    after = registry_module.rewrite_registry.rewrites["after-inference"]
    after.insert(0, after.pop(after.index(restore)))  # ahead of numba's own after-inference rewrites


def join_pipeline(rewrites: ModuleType, ir: ModuleType, errors: ModuleType) -> None:
    """The passes join another numba pipeline, with its own IR modules and rewrite registry (numba-cuda's:
    ``overdub.targets`` joins them once numba-cuda is imported, before it compiles anything; numba-cuda-mlir's,
    when the cuda-mlir target is). Its IR module lists each node kind's classes in ``*_types`` tuples where it
    has several (numba-cuda), else has one class of each kind (numba, numba-cuda-mlir)."""
    kinds = ("SetItem", "StaticSetItem", "Assign", "Expr", "Global")
    nodes = _Nodes(*(getattr(ir, f"{kind.lower()}_types", None) or (getattr(ir, kind),) for kind in kinds))
    _register(rewrites, ir, errors, nodes)


join_pipeline(numba.core.rewrites, numba.core.ir, numba.core.errors)
