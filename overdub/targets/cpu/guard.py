"""The threads of a row loop that can do anything: a kernel's bounds guard, read off its code.

Most kernels start by computing their global x index and returning at once for the threads outside the
data (``i = cuda.grid(1); if i < x.size: ...``, ``if x >= n or y >= m: return``). In the row loop each such
guard is a branch per thread: LLVM vectorises the loop only with masked loads and stores, which cost 2-3x a
plain loop on some CPUs (AMD's Zen 4 and 5), and cannot drop it (LLVM's inductive range check elimination
is not available through llvmlite). So, as that pass would, the row loop runs only the threads the guard
admits: it narrows its x range to them, and tells LLVM that the guard holds there (``llvm.assume`` of the
very comparison the kernel makes, which LLVM then folds away).

To gain a mental model, consider this kernel, launched with an int64 ``n`` in a chain where ``+`` has a
method for a user's struct ``S`` only::

    def kernel(out, s, n):            # a0, a1, a2
        i = cuda.grid(1)              # numba's (no overdub, method or hook of cuda.grid)
        m = n + 1                     # int64 + int64: no method of + applies -> numba's own
        if i >= m:                    # int64 >= int64: numba's own; the false branch goes on ...
            return                    # ... and this one returns at once
        out[i] = s.v

Every thread runs the two assignments before the guard, and each is numba's own operation on plain data: it
does nothing observable. So a thread with ``x >= a2 + 1`` does nothing at all, and the row loop becomes::

    lo, hi = narrow("<", (a2 + 1), lo, hi)    # the bound, compiled in the grid body, once per row
    for x in range(lo, hi):
        set_x(x, first, bx)
        assume_x("<", x, (a2 + 1))
        kernel(a0, a1, a2)

Had the kernel written ``t = s + s`` before the guard, that ``+`` reaches the user's method, which may count
its calls (an atomic add): every thread must run it, and :func:`x_bounds` returns no bounds.

The rule, kept small so that it is plainly sound: the walk (:class:`_Walk`) goes through the kernel's numba IR
from its entry, block by block, while every statement is an assignment of an operation that is *numba's own
on plain data* (:meth:`_Walk._numba_s`):

* its operands are known to be numbers, booleans, arrays, overdub structs, records or tuples of them -- the
  walk knows the exact numba type of each parameter from the launch (``argtypes``), of each constant, of a
  field or an array's ``shape``; of the result of numba's operations on numbers only that it is a number --
  so no numba-implemented dunder of a jitclass or an extension type runs;
* no table the call asks in the kernel's chain (:func:`overdub.tables.asked`: the contexts' overdubs, the
  methods added with ``od.method``, the operands' dunders) has a method applying to the operands' types,
  for any of the types each operand may have: the kernel's own typing dispatches on the actual types, so its
  call reaches numba's operation (a method that applies, added later, invalidates the kernel through that
  dispatch; while every table is empty, the emptiness is an edge); no context forwards the callee;
* the operation is an operator (``+``, ``<``, ``-x``, ``a[i]``; ``x += 1`` on numbers only: on an array it
  stores), an attribute read, a tuple, or a call of ``cuda.grid``, ``cuda.gridsize``, ``bool``, ``len``,
  ``min``, ``max`` or ``abs``; no hook observes a call anywhere in the chain, and ``cuda.grid`` and the
  thread indices mean what numba's do.

Each block ends in a branch one of whose targets returns at once; the condition must hold for the thread to
do anything. Those comparing the thread's global x index (``cuda.grid(1)``, ``cuda.grid(2)[0]``,
``threadIdx.x + blockIdx.x * blockDim.x``) with an expression of the kernel's parameters alone become the
bounds, as source the grid body evaluates once per row. A bound is built only of the walk's operations, which
are numba's own in the kernel too, so the grid body -- plain numba -- computes exactly what the kernel's
comparison reads; a parameter the launch does not pass (``def k(out, n=5)``) is its default, a constant, as
numba types it. Anything else ends the walk, and the row loop runs every thread.

numba internals: the untyped IR of ``numba.core.compiler.run_frontend``, its node classes, numba's types.
"""

from __future__ import annotations

import itertools
import math
import operator
import sys
import types as pytypes
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, TypeGuard, TypeVar

from numba import typeof
from numba.core import ir
from numba.core import types as nt
from numba.core.compiler import run_frontend

from ...hooktables import POSTHOOK, PREHOOK
from ...rewrite import CHAIN_MARK, ModuleProxy, Overdubbed
from ...roots import TargetRoot
from ...tables import asked
from ...types import StructType

if TYPE_CHECKING:
    from ...job import Chain

__all__ = ["x_bounds"]

_T = TypeVar("_T")

_COMPARISONS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # a op b is b _FLIPPED[op] a
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_ARITHMETIC = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//"}
_BUILTINS: tuple[Callable[..., object], ...] = (
    bool,
    len,
    min,
    max,
    abs,
)  # the calls besides cuda.grid a walk may pass, where numba's own
_NEVER_REROUTED = (operator.is_, operator.is_not)  # as operators.py: numba's always

# What a value computed by numba's operations on numbers may be: every number and boolean type (not complex:
# none comes from these). A kind -- the types a value may have -- is a tuple of numba types, or None: unknown.
_NUMBERS = tuple(sorted(nt.integer_domain, key=str)) + tuple(sorted(nt.real_domain, key=str)) + (nt.boolean,)
_MOST_TYPE_TUPLES = 4096  # an operation whose operands may have more type combinations is not enumerated
_LONGEST_SOURCE = 2000  # a bound's source (x = x + x, repeated, doubles it)


class _Idiom(NamedTuple):
    """numba-cuda's kernel idiom, as the walk reads the thread's global x index off it."""

    grid: Callable[..., object]
    gridsize: Callable[..., object]
    threadIdx: object
    blockIdx: object
    blockDim: object
    gridDim: object

    @property
    def grids(self) -> tuple[Callable[..., object], ...]:
        return (self.grid, self.gridsize)

    @property
    def thread_indices(self) -> tuple[object, ...]:
        return (self.threadIdx, self.blockIdx, self.blockDim, self.gridDim)

    @property
    def read(self) -> tuple[Callable[..., object] | object, ...]:
        """What the walk relies on meaning numba-cuda's own."""
        return (self.grid, self.gridsize, self.threadIdx, self.blockIdx, self.blockDim)


def _numba_cuda_idiom() -> _Idiom:
    from numba import cuda

    return _Idiom(cuda.grid, cuda.gridsize, cuda.threadIdx, cuda.blockIdx, cuda.blockDim, cuda.gridDim)  # type: ignore[attr-defined]  # numba-cuda's namespace is untyped


def x_bounds(func: pytypes.FunctionType, argtypes: tuple[nt.Type, ...]) -> tuple[tuple[str, str], ...]:
    """The bounds a thread's global x index must satisfy for ``func`` (a kernel as rewritten in its chain,
    compiled for the numba types ``argtypes``, one for each parameter the launch passes) to do anything, as
    ``(op, source)`` pairs -- ``x op source``, ``source`` an expression of the kernel's parameters, named
    ``a0, a1, ...`` -- or ``()`` where none is known. A kernel reads its index through numba-cuda's idiom:
    none does before numba-cuda is imported."""
    chain: Chain | None = func.__globals__.get(CHAIN_MARK)
    if chain is None or "numba.cuda" not in sys.modules:
        return ()
    idiom = _numba_cuda_idiom()
    if not _idiom_is_plain(chain, idiom):
        return ()
    try:
        function_ir = run_frontend(func)  # type: ignore[no-untyped-call]  # numba's is unannotated
    except Exception:  # numba's compile of the kernel says what is wrong with it
        return ()
    return tuple(_Walk(function_ir, chain, func, tuple(nt.unliteral(t) for t in argtypes), idiom).bounds())  # type: ignore[no-untyped-call]  # numba's is unannotated


def _idiom_is_plain(chain: Chain, idiom: _Idiom) -> bool:
    """Do ``cuda.grid`` and the thread indices mean what numba's do, and does no hook observe calls? (Each
    lookup is an edge of the kernel being built: an overdub or hook defined later recompiles it.)"""
    if any(ctx.observes(PREHOOK) or ctx.observes(POSTHOOK) for ctx in chain):
        return False
    for ctx in chain:
        if isinstance(ctx, TargetRoot):
            continue
        if any(ctx.forwarded(f) is not None or ctx.replacement(f) is not None for f in idiom.read):
            return False
    return all(each.table.is_empty() for f in idiom.grids for each in asked(chain, f))


def _is_plain_type(t: nt.Type) -> bool:
    """Is ``t`` data whose numba operations run no user code (no jitclass, no extension type's dunders)?"""
    if isinstance(t, nt.BaseTuple):
        return all(_is_plain_type(item) for item in t.types)  # type: ignore[attr-defined]  # each BaseTuple has them
    return isinstance(t, (nt.Number, nt.Boolean, nt.Array, nt.Record, StructType))


def _one_of(value: object, options: tuple[_T, ...]) -> TypeGuard[_T]:
    """``value in options`` by identity (a global array's ``==`` is no answer)."""
    return any(value is option for option in options)


def _resolved(value: object) -> object:
    """A global as the kernel's code means it: a module behind its proxy, a callee behind its Overdubbed."""
    if isinstance(value, ModuleProxy):
        return value.module
    if isinstance(value, Overdubbed):
        return value.callee
    return value


# An expression tree (see _Walk): a tuple whose first item is its tag.
_Node: TypeAlias = tuple[Any, ...]
# The numba types a value may have, or None: unknown.
_Kind: TypeAlias = tuple[nt.Type, ...] | None

_UNKNOWN: _Node = ("unknown",)


class _Walk:
    """A symbolic walk of a kernel's first blocks: each variable is an expression tree of tuples --
    ("arg", i), ("value", v) (a constant, a global or a captured value), ("getattr", e, name),
    ("getitem", e, e), ("call", e, (e, ...)), ("binop", op, e, e), ("unary", op, e), ("tuple", (e, ...)) --
    or _UNKNOWN."""

    def __init__(
        self,
        function_ir: ir.FunctionIR,
        chain: Chain,
        func: pytypes.FunctionType,
        argtypes: tuple[nt.Type, ...],
        idiom: _Idiom,
    ) -> None:
        self.chain, self.func, self.argtypes, self.idiom = chain, func, argtypes, idiom
        self.blocks = function_ir.blocks
        self.entry = min(function_ir.blocks)
        self.env: dict[str, _Node] = {}
        self.answers: dict[
            tuple[tuple[object, ...], tuple[_Kind, ...]], bool
        ] = {}  # (operations, operand kinds) -> whether numba's own
        self.kinds: dict[int, tuple[_Node, _Kind]] = {}  # id(node) -> (node, its kind)
        self.sources: dict[int, tuple[_Node, str | None]] = {}  # id(node) -> (node, its source)

    def bounds(self) -> Iterator[tuple[str, str]]:
        label, seen = self.entry, set[int]()
        while label not in seen:
            seen.add(label)
            block = self.blocks[label]
            for stmt in block.body[:-1]:
                if not (isinstance(stmt, ir.Assign) and self._assign(stmt)):
                    return  # a side effect: the threads past here may do something
            last = block.body[-1]
            if isinstance(last, ir.Jump):
                label = last.target
                continue
            if not isinstance(last, ir.Branch):
                return
            if self._returns_at_once(last.falsebr, set()):
                holds, label = True, last.truebr
            elif self._returns_at_once(last.truebr, set()):
                holds, label = False, last.falsebr
            else:
                return
            bound = self._bound(self._expression(last.cond), holds)
            if bound is not None:
                yield bound

    # -- the statements a walk passes ------------------------------------------------------------------------

    def _assign(self, stmt: ir.Assign) -> bool:
        value = stmt.value
        if isinstance(value, ir.Expr) and not self._pure(value):
            return False  # an operation that may reach user code: that code may do anything
        self.env[stmt.target.name] = self._node(value)
        return True

    def _pure(self, expr: ir.Expr) -> bool:
        """Is the operation ``expr`` numba's own on plain data, in this chain (see the module)?"""
        op: str = expr.op

        def var(v: ir.Var) -> _Node:
            return self.env.get(v.name, _UNKNOWN)

        if op == "cast" or (op == "binop" and expr.fn in _NEVER_REROUTED):
            return True
        if op == "getattr":
            return self._module_attribute(var(expr.value)) is not None or self._plain(var(expr.value))
        if op == "build_tuple":
            return all(self._plain(var(item)) for item in expr.items)
        if op == "exhaust_iter":
            return self._plain(var(expr.value))
        if op == "static_getitem" and expr.index_var is None:  # never rerouted: numba's own on a tuple
            return self._plain(var(expr.value))
        if op == "binop":
            return self._numba_s((expr.fn,), [var(expr.lhs), var(expr.rhs)])
        if op == "inplace_binop":  # on numbers only: numba's a += 1 on an array stores into it
            operands = [var(expr.lhs), var(expr.rhs)]
            return all(map(self._numeric, operands)) and self._numba_s((expr.fn, expr.immutable_fn), operands)
        if op == "unary":
            return self._numba_s((expr.fn,), [var(expr.value)])
        if op in ("getitem", "static_getitem"):
            index = expr.index if op == "getitem" else expr.index_var
            return self._numba_s((operator.getitem,), [var(expr.value), var(index)])
        if op == "call" and not expr.kws and expr.vararg is None and expr.varkwarg is None:
            callee = self._value_of(expr.func)
            if _one_of(callee, self.idiom.grids):
                return True  # _idiom_is_plain: numba's own
            if _one_of(callee, _BUILTINS):
                return self._numba_s((callee,), [var(arg) for arg in expr.args])
        return False

    def _numba_s(self, ops: tuple[Callable[..., object], ...], operands: list[_Node]) -> bool:
        """Does a call of ``ops`` (an operator, then its fallback: ``iadd`` then ``add``) on ``operands``
        reach numba's own operation on plain data? No table it asks may have a method applying to the
        operands' types, for any type each may have; no context may forward it."""
        if not all(self._plain(node) for node in operands):
            return False
        kinds = tuple(self._kind(node) for node in operands)
        key = (ops, kinds)
        known = self.answers.get(key)
        if known is None:
            known = self.answers[key] = self._no_method_applies(ops, kinds)
        return known

    def _no_method_applies(self, ops: tuple[Callable[..., object], ...], kinds: tuple[_Kind, ...]) -> bool:
        for op in ops:
            if any(ctx.forwarded(op) is not None for ctx in self.chain):
                return False
            for each in asked(self.chain, op):
                if each.table.is_empty():
                    continue  # an edge: the table's first method recompiles the kernel
                known = [kind for kind in kinds if kind is not None]
                if len(known) < len(kinds) or math.prod(len(kind) for kind in known) > _MOST_TYPE_TUPLES:
                    return False
                if any(m.applies_to(types) for m in each.table.methods for types in itertools.product(*known)):
                    return False
        return True

    # -- what each value is --------------------------------------------------------------------------------

    def _plain(self, node: _Node) -> bool:
        """Is ``node`` known to be plain data (:func:`_is_plain_type`)?"""
        if node[0] == "tuple":
            return all(self._plain(item) for item in node[1])
        kind = self._kind(node)
        return kind is not None and all(_is_plain_type(t) for t in kind)

    def _kind(self, node: _Node) -> _Kind:
        """The numba types ``node`` may have (a tuple of them; the kernel's typing gives it one of them, its
        literal type aside), or None where unknown."""
        return self._memo(self.kinds, node, self._kind_of)

    @staticmethod
    def _memo(table: dict[int, tuple[_Node, _T]], node: _Node, compute: Callable[[_Node], _T]) -> _T:
        """``compute(node)``, once per node: trees share their subtrees (``x = x + x`` twice is four x's)."""
        known = table.get(id(node))
        if known is None or known[0] is not node:
            known = table[id(node)] = (node, compute(node))
        return known[1]

    def _kind_of(self, node: _Node) -> _Kind:
        tag = node[0]
        if tag == "arg":
            return (self.argtypes[node[1]],)
        if tag == "value":
            value = node[1]
            if type(value) not in (int, float, bool):
                return None
            try:
                return (nt.unliteral(typeof(value)),)  # type: ignore[no-untyped-call]  # numba's is unannotated
            except ValueError:  # an integer beyond 64 bits: numba refuses it too
                return None
        if tag == "getattr":
            return self._attribute_kind(node)
        if tag == "getitem":
            return self._item_kind(node)
        if tag == "call":
            callee, args = self._callee(node[1]), node[2]
            if (
                _one_of(callee, self.idiom.grids)
                and len(args) == 1
                and args[0][0] == "value"
                and args[0][1] in (1, 2, 3)
            ):
                return (nt.int64,) if args[0][1] == 1 else (nt.UniTuple(nt.int64, args[0][1]),)  # type: ignore[no-untyped-call]  # numba's is unannotated
            if callee is len:
                return _NUMBERS
            if _one_of(callee, _BUILTINS) and all(self._numeric(arg) for arg in args):
                return _NUMBERS
            return None
        if tag == "binop" or tag == "unary":
            return _NUMBERS if all(self._numeric(operand) for operand in node[2:]) else None
        return None

    def _numeric(self, node: _Node) -> bool:
        kind = self._kind(node)
        return kind is not None and set(kind) <= set(_NUMBERS)

    def _attribute_kind(self, node: _Node) -> _Kind:
        if self._index(node, "xyz") is not None:
            return _NUMBERS  # threadIdx.x and the like
        kind, name = self._kind(node[1]), node[2]
        if kind is None or len(kind) != 1:
            return None
        (owner,) = kind
        if isinstance(owner, nt.Array):
            if name in ("size", "ndim"):
                return (nt.intp,)
            if name in ("shape", "strides"):
                return (nt.UniTuple(nt.intp, owner.ndim),)  # type: ignore[no-untyped-call]  # numba's is unannotated
        if isinstance(owner, StructType):
            field = owner.field_type(name)
            return None if field is None else (nt.unliteral(field),)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return None

    def _item_kind(self, node: _Node) -> _Kind:
        owner, index = self._kind(node[1]), self._kind(node[2])
        if owner is None or len(owner) != 1:
            return None
        (container,) = owner
        if isinstance(container, nt.UniTuple):
            return (container.dtype,)
        integer_index = index is not None and all(isinstance(t, nt.Integer) for t in index)
        if isinstance(container, nt.Array) and container.ndim == 1 and integer_index:
            return (container.dtype,)
        return None

    # -- the expression trees ------------------------------------------------------------------------------

    def _value_of(self, var: ir.Var) -> object:
        return self._callee(self.env.get(var.name, _UNKNOWN))

    def _callee(self, node: _Node) -> object:
        """What a call of ``node`` calls: a global or a module's attribute (None where unknown)."""
        return _resolved(node[1]) if node[0] == "value" else self._module_attribute(node)

    def _module_attribute(self, node: _Node) -> object:
        """The value of ``module.attr`` (or ``module.attr.attr``) nodes, a module's own value included; None
        for anything else."""
        if node[0] == "value":
            value = _resolved(node[1])
            return value if isinstance(value, pytypes.ModuleType) else None
        if node[0] == "getattr":
            owner = self._module_attribute(node[1])
            if owner is not None:
                return getattr(owner, node[2], None)
        return None

    def _parameter(self, index: int) -> _Node:
        """A parameter of the kernel: the launch's argument, or -- not passed -- its default, a constant
        numba types as it types the default (a number only; anything else is unknown)."""
        if index < len(self.argtypes):
            return ("arg", index)
        code, defaults = self.func.__code__, self.func.__defaults__ or ()
        first = code.co_argcount - len(defaults)
        if first <= index < code.co_argcount and type(defaults[index - first]) in (int, float, bool):
            return ("value", defaults[index - first])
        return _UNKNOWN

    def _node(self, value: Any) -> _Node:  # a numba IR value: a Var, an Arg, a constant or an Expr
        if isinstance(value, ir.Var):
            return self.env.get(value.name, _UNKNOWN)
        if isinstance(value, ir.Arg):
            return self._parameter(value.index)
        if isinstance(value, (ir.Const, ir.Global, ir.FreeVar)):
            return ("value", _resolved(value.value))
        op = value.op
        if op in ("cast", "exhaust_iter"):
            return self._node(value.value)
        if op == "getattr":
            return ("getattr", self._node(value.value), value.attr)
        if op == "static_getitem":
            return ("getitem", self._node(value.value), ("value", value.index))
        if op == "getitem":
            return ("getitem", self._node(value.value), self._node(value.index))
        if op == "build_tuple":
            return ("tuple", tuple(self._node(item) for item in value.items))
        if op in ("binop", "inplace_binop"):
            fn = value.fn if op == "binop" else value.immutable_fn
            return ("binop", fn, self._node(value.lhs), self._node(value.rhs))
        if op == "unary":
            return ("unary", value.fn, self._node(value.value))
        if op == "call" and not value.kws and value.vararg is None:
            return ("call", self._node(value.func), tuple(self._node(arg) for arg in value.args))
        return _UNKNOWN

    def _expression(self, var: ir.Var) -> _Node:
        node = self.env.get(var.name, _UNKNOWN)
        if node[0] == "call" and self._callee(node[1]) is bool and len(node[2]) == 1:
            compared: _Node = node[2][0]  # the truth of a comparison is the comparison
            return compared
        return node

    def _returns_at_once(self, label: int, seen: set[int]) -> bool:
        """Does the block at ``label`` return without doing anything (assignments of constants, jumps)?"""
        if label in seen:
            return False
        seen.add(label)
        block = self.blocks[label]
        for stmt in block.body[:-1]:
            if not (
                isinstance(stmt, ir.Assign)
                and (
                    isinstance(stmt.value, (ir.Const, ir.Var))
                    or (isinstance(stmt.value, ir.Expr) and stmt.value.op == "cast")
                )
            ):
                return False
        last = block.body[-1]
        if isinstance(last, ir.Jump):
            return self._returns_at_once(last.target, seen)
        return isinstance(last, ir.Return)

    # -- the bounds ----------------------------------------------------------------------------------------

    def _bound(self, condition: _Node, holds: bool) -> tuple[str, str] | None:
        """``(op, source)`` where the condition (when ``holds``, else its negation) compares x with an
        expression of the arguments alone."""
        if condition[0] != "binop" or condition[1] not in _COMPARISONS:
            return None
        op, lhs, rhs = _COMPARISONS[condition[1]], condition[2], condition[3]
        if not self._is_x(lhs):
            if not self._is_x(rhs):
                return None
            op, lhs, rhs = _FLIPPED[op], rhs, lhs
        source = self._source(rhs)
        if source is None:
            return None
        return (op if holds else _NEGATED[op]), source

    def _is_x(self, node: _Node) -> bool:
        """Is ``node`` the thread's global x index?"""
        if node[0] == "call":
            grid, args = self._module_attribute(node[1]), node[2]
            return grid is self.idiom.grid and args == (("value", 1),)
        if node[0] == "getitem" and node[2] == ("value", 0) and node[1][0] == "call":
            grid, args = self._module_attribute(node[1][1]), node[1][2]
            return grid is self.idiom.grid and args in ((("value", 2),), (("value", 3),))
        if node[0] == "binop" and node[1] is operator.add:
            for thread, block in ((node[2], node[3]), (node[3], node[2])):
                if self._index(thread) is self.idiom.threadIdx and block[0] == "binop" and block[1] is operator.mul:
                    factors = {self._index(block[2]), self._index(block[3])}
                    if factors == {self.idiom.blockIdx, self.idiom.blockDim}:
                        return True
        return False

    def _index(self, node: _Node, axes: str = "x") -> object:
        """``cuda.threadIdx`` for a node reading ``cuda.threadIdx.x`` (and so on, and the ``axes`` given);
        None for anything else."""
        if node[0] == "getattr" and node[2] in axes:
            owner = self._module_attribute(node[1])
            if any(owner is index for index in self.idiom.thread_indices):
                return owner
        return None

    def _source(self, node: _Node) -> str | None:
        """Python source computing ``node`` from the kernel's parameters (``a0, a1, ...``), or None where it
        reads anything else. (Each operation in ``node`` passed the walk: numba's own, in the kernel too.)"""
        source = self._memo(self.sources, node, self._source_of)
        return None if source is None or len(source) > _LONGEST_SOURCE else source

    def _source_of(self, node: _Node) -> str | None:
        kind = node[0]
        if kind == "arg":
            return f"a{node[1]}"
        if kind == "value":
            value = node[1]
            return repr(value) if type(value) is int else None
        if kind == "getattr":
            owner = self._source(node[1])
            return None if owner is None or not node[2].isidentifier() else f"{owner}.{node[2]}"
        if kind == "getitem" and node[1][0] == "getattr" and node[1][2] in ("shape", "strides"):
            owner, index = self._source(node[1]), node[2]
            return None if owner is None or index[0] != "value" or type(index[1]) is not int else f"{owner}[{index[1]}]"
        if kind == "binop" and node[1] in _ARITHMETIC:
            left, right = self._source(node[2]), self._source(node[3])
            return None if left is None or right is None else f"({left} {_ARITHMETIC[node[1]]} {right})"
        if kind == "unary" and node[1] is operator.neg:
            inner = self._source(node[2])
            return None if inner is None else f"(-{inner})"
        callee = self._callee(node[1]) if kind == "call" else None
        if callee is len or callee is min or callee is max:
            args = [self._source(arg) for arg in node[2]]
            if args and None not in args:
                return f"{callee.__name__}({', '.join(typing.cast('list[str]', args))})"
        return None
