"""The threads of a row loop that can do anything: a kernel's bounds guard, read off its code.

Most kernels start by computing their global x index and returning at once for the threads outside the
data (``i = cuda.grid(1); if i < x.size: ...``, ``if x >= n or y >= m: return``). In the row loop each such
guard is a branch per thread: LLVM vectorises the loop only with masked loads and stores, which cost 2-3x a
plain loop on some CPUs (AMD's Zen 4 and 5), and cannot drop it (LLVM's inductive range check elimination
is not available through llvmlite). So, as that pass would, the row loop runs only the threads the guard
admits: it narrows its x range to them, and tells LLVM that the guard holds there (``llvm.assume`` of the
very comparison the kernel makes, which LLVM then folds away).

That is sound where a thread the guard rejects does nothing observable. :func:`x_bounds` reads the kernel's
numba IR from its entry: blocks of side-effect-free assignments (index arithmetic, attribute and element
reads, ``cuda.grid``), each ending in a branch one of whose targets returns at once. Each such branch's
condition must hold for the thread to do anything; those comparing the thread's global x index
(``cuda.grid(1)``, ``cuda.grid(2)[0]``, ``threadIdx.x + blockIdx.x * blockDim.x``) with an expression of the
kernel's arguments alone become the bounds, as source the row loop evaluates once per row. Anything else --
a store, a print, a call, a loop before the guard; an operation on numbers, an element read or
``cuda.grid`` that a method or a context's overdub may take; a hook that observes calls -- ends the walk,
and the row loop runs every thread.

numba internals: the untyped IR of ``numba.core.compiler.run_frontend`` and its node classes.
"""

from __future__ import annotations

import operator

from numba import cuda as numba_cuda
from numba.core import ir
from numba.core import types as nt
from numba.core.compiler import run_frontend

from ...context import POSTHOOK, PREHOOK, TargetRoot
from ...operators import INPLACE
from ...rewrite import CHAIN_MARK, ModuleProxy, Overdubbed
from ...tables import asked

__all__ = ["x_bounds"]

_COMPARISONS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # a op b is b _FLIPPED[op] a
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_ARITHMETIC = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//"}
_PURE_CALLS = (numba_cuda.grid, numba_cuda.gridsize, bool, len, min, max, abs)
_IDIOM = (numba_cuda.grid, numba_cuda.gridsize, numba_cuda.threadIdx, numba_cuda.blockIdx, numba_cuda.blockDim)


def _tables(chain: tuple, callee) -> list:
    """The tables a call of ``callee`` asks (:func:`overdub.tables.asked`)."""
    return [each.table for each in asked(chain, callee)]


def x_bounds(func) -> tuple[tuple[str, str], ...]:
    """The bounds a thread's global x index must satisfy for ``func`` (a kernel as rewritten in its chain) to
    do anything, as ``(op, source)`` pairs -- ``x op source``, ``source`` an expression of the kernel's
    parameters, named ``a0, a1, ...`` -- or ``()`` where none is known."""
    chain = func.__globals__.get(CHAIN_MARK)
    if chain is None or not _idiom_is_plain(chain):
        return ()
    try:
        function_ir = run_frontend(func)
    except Exception:  # numba's compile of the kernel says what is wrong with it
        return ()
    return tuple(_Walk(function_ir, chain).bounds())


def _idiom_is_plain(chain: tuple) -> bool:
    """Do ``cuda.grid`` and the thread indices mean what numba's do, and does no hook observe calls? (Each
    lookup is an edge of the kernel being built: an overdub or hook defined later recompiles it.)"""
    if any(ctx.observes(PREHOOK) or ctx.observes(POSTHOOK) for ctx in chain):
        return False
    for ctx in chain:
        if isinstance(ctx, TargetRoot):
            continue
        if any(ctx.forwarded(f) is not None for f in _IDIOM) or any(ctx.replacement(f) is not None for f in _IDIOM):
            return False
    return all(table.is_empty() for f in (numba_cuda.grid, numba_cuda.gridsize) for table in _tables(chain, f))


_NUMBERS = tuple(sorted(nt.integer_domain, key=str)) + (nt.float32, nt.float64, nt.boolean)


def _numba_s_on_numbers(chain: tuple, op, arity: int) -> bool:
    """Is ``op`` on numbers (and booleans) numba's own operation in ``chain``: does no method of its tables
    (overdubs, methods added to it, dunders) take them? A method for a user's type leaves them numba's. (The
    kernel's own typing of each such operation consults its table for the actual types: a method that takes
    numbers, added later, recompiles it.)"""
    pairs = [(t,) for t in _NUMBERS] if arity == 1 else [(a, b) for a in _NUMBERS for b in _NUMBERS]
    for each in (op, INPLACE.get(op)):
        for table in _tables(chain, each) if each is not None else ():
            if not table.is_empty() and any(m.applies_to(types) for m in table.methods for types in pairs):
                return False
    return True


def _resolved(value):
    """A global as the kernel's code means it: a module behind its proxy, a callee behind its Overdubbed."""
    if isinstance(value, ModuleProxy):
        return value.module
    if isinstance(value, Overdubbed):
        return value.callee
    return value


_UNKNOWN = ("unknown",)


class _Walk:
    """A symbolic walk of a kernel's first blocks: each variable is an expression tree of tuples --
    ("arg", i), ("value", v) (a constant, a global or a captured value), ("getattr", e, name),
    ("getitem", e, e), ("call", e, (e, ...)), ("binop", op, e, e), ("neg", e), ("tuple", (e, ...)) -- or
    _UNKNOWN."""

    def __init__(self, function_ir, chain: tuple):
        self.chain, self.numba_s = chain, {}
        self.blocks = function_ir.blocks
        self.entry = min(function_ir.blocks)
        self.env: dict = {}

    def bounds(self):
        label, seen = self.entry, set()
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

    def _assign(self, stmt) -> bool:
        value = stmt.value
        if isinstance(value, ir.Expr):
            if value.op == "call" and _resolved(self._value_of(value.func)) not in _PURE_CALLS:
                return False
            if value.op not in (
                "call",
                "binop",
                "inplace_binop",
                "unary",
                "getattr",
                "getitem",
                "static_getitem",
                "exhaust_iter",
                "build_tuple",
                "cast",
            ):
                return False
            if not self._numba_s(value):
                return False  # an operation a method may take: that method may do anything
        self.env[stmt.target.name] = self._node(value)
        return True

    def _numba_s(self, expr) -> bool:
        """Is the operation ``expr`` numba's own, as far as it is one on numbers? (Array reads are operations
        of ``operator.getitem``: an overdub of it -- a checking context -- is a side effect; ``bool``, ``abs``,
        ``min`` and ``max`` may have methods too.)"""
        if expr.op in ("binop", "inplace_binop", "unary"):
            key = (expr.fn, 1 if expr.op == "unary" else 2)
        elif expr.op == "getitem" or (expr.op == "static_getitem" and expr.index_var is not None):
            key = (operator.getitem, 0)  # on arrays: any method or overdub counts
        elif expr.op == "call" and _resolved(self._value_of(expr.func)) in (bool, abs, min, max):
            key = (_resolved(self._value_of(expr.func)), len(expr.args))
        else:
            return True
        known = self.numba_s.get(key)
        if known is None:
            op, arity = key
            known = self.numba_s[key] = (
                _numba_s_on_numbers(self.chain, op, arity)
                if arity in (1, 2)
                else all(table.is_empty() for table in _tables(self.chain, op))
            )
        return known

    def _value_of(self, var):
        node = self.env.get(var.name, _UNKNOWN)
        return node[1] if node[0] == "value" else self._module_attribute(node)

    def _module_attribute(self, node):
        """The value of ``module.attr`` (or ``module.attr.attr``) nodes; None for anything else."""
        if node[0] == "value":
            return _resolved(node[1])
        if node[0] == "getattr":
            owner = self._module_attribute(node[1])
            if owner is not None:
                return getattr(owner, node[2], None)
        return None

    def _node(self, value):
        if isinstance(value, ir.Var):
            return self.env.get(value.name, _UNKNOWN)
        if isinstance(value, ir.Arg):
            return ("arg", value.index)
        if isinstance(value, (ir.Const, ir.Global, ir.FreeVar)):
            return ("value", _resolved(value.value))
        op = value.op
        if op == "cast":
            return self._node(value.value)
        if op == "getattr":
            return ("getattr", self._node(value.value), value.attr)
        if op == "static_getitem":
            return ("getitem", self._node(value.value), ("value", value.index))
        if op == "getitem":
            return ("getitem", self._node(value.value), self._node(value.index))
        if op == "exhaust_iter":
            return self._node(value.value)
        if op == "build_tuple":
            return ("tuple", tuple(self._node(item) for item in value.items))
        if op in ("binop", "inplace_binop"):
            fn = value.fn if op == "binop" else value.immutable_fn
            return ("binop", fn, self._node(value.lhs), self._node(value.rhs))
        if op == "unary" and value.fn is operator.neg:
            return ("neg", self._node(value.value))
        if op == "call" and not value.kws and value.vararg is None:
            return ("call", self._node(value.func), tuple(self._node(arg) for arg in value.args))
        return _UNKNOWN

    def _expression(self, var):
        node = self.env.get(var.name, _UNKNOWN)
        if node[0] == "call" and self._module_attribute(node[1]) is bool and len(node[2]) == 1:
            return node[2][0]  # the truth of a comparison is the comparison
        return node

    def _returns_at_once(self, label: int, seen: set) -> bool:
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

    def _bound(self, condition, holds: bool):
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

    def _is_x(self, node) -> bool:
        """Is ``node`` the thread's global x index?"""
        if node[0] == "call":
            grid, args = self._module_attribute(node[1]), node[2]
            return grid is numba_cuda.grid and args == (("value", 1),)
        if node[0] == "getitem" and node[2] == ("value", 0) and node[1][0] == "call":
            grid, args = self._module_attribute(node[1][1]), node[1][2]
            return grid is numba_cuda.grid and args in ((("value", 2),), (("value", 3),))
        if node[0] == "binop" and node[1] is operator.add:
            for thread, block in ((node[2], node[3]), (node[3], node[2])):
                if self._index(thread) is numba_cuda.threadIdx and block[0] == "binop" and block[1] is operator.mul:
                    factors = {self._index(block[2]), self._index(block[3])}
                    if factors == {numba_cuda.blockIdx, numba_cuda.blockDim}:
                        return True
        return False

    def _index(self, node):
        """``cuda.threadIdx`` for a node reading ``cuda.threadIdx.x`` (and so on); None for anything else."""
        if node[0] == "getattr" and node[2] == "x":
            owner = self._module_attribute(node[1])
            if owner is numba_cuda.threadIdx or owner is numba_cuda.blockIdx or owner is numba_cuda.blockDim:
                return owner
        return None

    def _source(self, node) -> str | None:
        """Python source computing ``node`` from the kernel's parameters (``a0, a1, ...``), or None where it
        reads anything else."""
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
        if kind == "neg":
            inner = self._source(node[1])
            return None if inner is None else f"(-{inner})"
        if kind == "call" and self._module_attribute(node[1]) in (len, min, max):
            args = [self._source(arg) for arg in node[2]]
            if args and None not in args:
                return f"{self._module_attribute(node[1]).__name__}({', '.join(args)})"
        return None
