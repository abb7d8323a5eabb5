"""A differential kernel fuzzer: kernels generated at random from a small grammar, run on the CPU target with
its bounds guard, checked (``debug=True``: every thread runs), on CUDA where a GPU is, and by an independent
reference -- a plain-Python loop over every block and thread, with numpy's int64 and float64 scalars for
numba's, and each thread a generator that yields at a barrier.

The grammar covers guards of every shape (a bounding ``if``, an early return, nested, 2D and 3D, a grid-stride
loop, a walrus, ``and``/``or`` with calls, a bound from a default parameter or a user operator method),
effects before and inside guards (stores, atomics, hooked calls, reads a context counts, operators on a
struct whose dunders count), contexts with state, overdubs and hooks, a generic function, loops, barriers,
shared and local arrays, casts of extreme floats (compared with CUDA's saturating ``cvt.rzi``) and integer
wraparound. Every kernel is deterministic by construction: each thread writes only its own output slots,
shared counters change only through commutative atomics, and shared memory is read only across a barrier.

Each expression and statement is a pair of texts: the kernel's source, and the reference's (``I(5)`` for a
literal, so that the reference wraps as int64 does; ``yield`` for a barrier; explicit calls where the source
relies on overdub's dispatch). The tree keeps the pieces, so a divergence shrinks (:func:`shrink`) by
removing statements, hoisting bodies out of their blocks and replacing expressions by their operands.

Reproduce one batch: ``python tests/fuzz_kernels.py SEED [COUNT] [--target cuda]``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

K = 4  # output slots per thread (or per element, in a grid-stride loop)
L = 16  # length of the input arrays xs and fs
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
STATE = 8  # the context's state: [0] counted reads, [1] prehook calls, [2] posthook sum, [3:6] struct effects

ITEMS = {
    "guard": "CPU guard, wrong result / crashes",
    "saturation": "CPU vs GPU: int(x) of inf or 1e30",
    "fmod": "CPU vs GPU: math.fmod",
}
"""Items of issue 19 that other changes fix; a recorded finding names the one it is."""

# --- the module each batch of kernels lives in --------------------------------------------------------------

HEADER = '''
import math
import operator

import numpy as np
import overdub as od
from numba import cuda

fz = od.Context("fz", state=od.Array[od.int64, 1])


@od.struct
class S:
    a: od.int64
    b: od.float64

    def __add__(self, o: "S"):
        return S(self.a + o.a, self.b + o.b)

    def __sub__(self, o: "S"):
        return S(self.a - o.a, self.b * 0.5)

    def __neg__(self):
        return S(-self.a, -self.b)

    def __lt__(self, o: "S"):
        return self.a < o.a


@od.struct
class P:
    a: od.int64
    b: od.float64

    def __add__(self, o: "P"):
        cuda.atomic.add(od.state(), 3, 1)
        return P(self.a + o.a, self.b)

    def __abs__(self):
        cuda.atomic.add(od.state(), 4, 1)
        return P(abs(self.a), abs(self.b))


@od.method(operator.add)
def _int_plus_s(x: od.Integer, s: S):
    return x + s.a * 2


@od.method(operator.sub)
def _int_minus_p(x: od.Integer, q: P):
    cuda.atomic.add(od.state(), 5, 1)
    return x - q.a


@od.function
def gf(x: od.Integer):
    return x * 7 - 3


@od.function
def gf(x: od.Float):
    return x * 0.5 + 1.0


def h(x):
    return x * 3 + 1


@fz.overdub(h)
def _h_in_fz(x):
    return x * 5 - 2


def g(x):
    return x ^ 6


@fz.prehook(g)
def _before_g(x):
    cuda.atomic.add(od.state(), 1, 1)


@fz.posthook(g)
def _after_g(r, x):
    cuda.atomic.add(od.state(), 2, r & 7)


@fz.overdub(operator.getitem)
def _counted_read(a: od.Array[od.int64, 1], i: od.Integer):
    cuda.atomic.add(od.state(), 0, 1)
    return a[i]
'''


REF_HEADER = '''
def S(a, b):
    return _Struct("S", a, b)


def P(a, b):
    return _Struct("P", a, b)


def s_add(l, r):
    return S(l.a + r.a, l.b + r.b)


def s_sub(l, r):
    return S(l.a - r.a, l.b * 0.5)


def s_neg(v):
    return S(-v.a, -v.b)


def s_lt(l, r):
    return l.a < r.a


def p_add(l, r):
    od.count(3, 1)
    return P(l.a + r.a, l.b)


def p_abs(v):
    od.count(4, 1)
    return P(abs(v.a), abs(v.b))


def int_plus_s(x, s):
    return x + s.a * I(2)


def int_minus_p(x, q):
    od.count(5, 1)
    return x - q.a


def gf(x):
    if isinstance(x, np.integer):
        return x * I(7) - I(3)
    return x * 0.5 + 1.0


def h(x):
    if od.ctx:
        return x * I(5) - I(2)
    return x * I(3) + I(1)


def g(x):
    od.count(1, 1)
    r = x ^ I(6)
    od.count(2, r & I(7))
    return r


def RD(a, i):
    od.count(0, 1)
    return a[i]
'''


@dataclasses.dataclass(frozen=True)
class Ex:
    """An expression: format strings for the kernel and the reference, filled with its operands' texts."""

    fod: str
    fref: str
    kids: tuple[Ex, ...] = ()
    kind: str = "i"  # i: int64, f: float64, c: condition, s/p: a struct S or P
    folds: bool = False  # an operator CPython folds when its operands are literals
    literal: bool = False

    @property
    def od(self) -> str:
        kids = [k.od for k in self.kids]
        if self.folds and self.kids and all(k.literal for k in self.kids) and self.kids[0].kind == "i":
            # CPython folds ``(2147483648 << 37)`` into an int numba cannot type; a call is never folded
            kids[0] = f"np.int64{kids[0]}"
        return self.fod.format(*kids)

    @property
    def ref(self) -> str:
        return self.fref.format(*(k.ref for k in self.kids))


def leaf(od: str, ref: str | None = None, kind: str = "i") -> Ex:
    return Ex(
        od.replace("{", "{{").replace("}", "}}"),
        (od if ref is None else ref).replace("{", "{{").replace("}", "}}"),
        (),
        kind,
    )


def lit(value: int | float) -> Ex:
    if isinstance(value, float):
        text = repr(value) if math.isfinite(value) else ("math.inf" if value > 0 else "-math.inf")
        return dataclasses.replace(leaf(f"({text})", f"({text})", "f"), literal=True)
    text = str(value) if value != INT64_MIN else "(-9223372036854775807 - 1)"
    return dataclasses.replace(leaf(f"({text})", f"I({value})", "i"), literal=True)


ZERO = {"i": lit(0), "f": lit(0.5), "c": leaf("(0 < 1)", "(0 < 1)", "c")}


@dataclasses.dataclass
class St:
    """A statement: format strings (one or more lines) filled with its expressions; a block has a body."""

    fod: str
    fref: str
    exprs: tuple[Ex, ...] = ()
    body: list[St] | None = None
    orelse: list[St] | None = None
    fixed: bool = False  # the shrinker keeps it (definitions every later statement may use)

    def render(self, ref: bool, indent: str) -> list[str]:
        text = (self.fref if ref else self.fod).format(*((e.ref if ref else e.od) for e in self.exprs))
        lines = [indent + line for line in text.split("\n")]
        if self.body is not None:
            lines += render_body(self.body, ref, indent + "    ")
        if self.orelse:
            lines.append(indent + "else:")
            lines += render_body(self.orelse, ref, indent + "    ")
        return lines


def render_body(body: list[St], ref: bool, indent: str) -> list[str]:
    lines = [line for st in body for line in st.render(ref, indent)]
    return lines or [indent + "pass"]


@dataclasses.dataclass
class Kernel:
    """One generated kernel and its launch."""

    name: str
    body: list[St]
    blocks: tuple[int, ...]
    threads: tuple[int, ...]
    n: int
    m: int
    ctx: bool
    outn: int  # output slots / K
    seed: str
    shape: str = "if"

    def source(self, ref: bool = False) -> str:
        head = f"def {self.name}(out, fout, cnt, xs, fs, n, m, s, p, d={'I(7)' if ref else '7'}):"
        return "\n".join([head, *render_body(self.body, ref, "    ")]) + "\n"


# --- the grammar ---------------------------------------------------------------------------------------------


class Generator:
    """Kernels from one seeded ``random.Random``: the same seed gives the same kernels."""

    def __init__(self, rng: random.Random):
        self.r = rng

    # expressions

    def int_leaf(self, env) -> Ex:
        r = self.r
        choice = r.randrange(12)
        if choice < 3:
            return leaf(r.choice(env["ints"]), None)
        if choice < 5:
            return lit(r.choice([0, 1, 2, 3, 7, -1, -5, 100, 2**31, 2**62, INT64_MAX, INT64_MIN, r.getrandbits(63)]))
        if choice == 5:
            return leaf(r.choice(["n", "m", "d"]), None)
        if choice < 8:
            return Ex(
                "xs[({}) % 16]", "RD(xs, ({}) % I(16))" if env["ctx"] else "xs[({}) % I(16)]", (self.int_small(env),)
            )
        if choice == 8 and env.get("la"):
            return Ex(
                "la[({}) % 4]", "RD(la, ({}) % I(4))" if env["ctx"] else "la[({}) % I(4)]", (self.int_small(env),)
            )
        if choice == 9 and env.get("sh"):
            c = r.randrange(64)
            read = f"sh[(t + {c}) % bd]"
            return leaf(read, f"RD(sh, (t + I({c})) % bd)" if env["ctx"] else f"sh[(t + I({c})) % bd]")
        if choice == 10:
            return leaf(r.choice(["q.a", "s.a"]), None)
        return leaf("xs.size", "I(xs.size)")

    def int_small(self, env) -> Ex:
        return leaf(self.r.choice(env["ints"]), None) if self.r.random() < 0.7 else lit(self.r.randrange(-20, 20))

    def int_expr(self, env, depth: int = 0) -> Ex:
        r = self.r
        if depth >= 3 or r.random() < 0.3:
            return self.int_leaf(env)
        a = self.int_expr(env, depth + 1)
        b = self.int_expr(env, depth + 1)
        choice = r.randrange(20)
        if choice < 6:
            sym = r.choice(["+", "-", "*", "^", "&", "|"])
            return Ex(f"({{}} {sym} {{}})", f"({{}} {sym} {{}})", (a, b), folds=True)
        if choice < 8:
            c, sym = r.randrange(1, 10), r.choice(["//", "%"])
            return Ex(f"({{}} {sym} {c})", f"({{}} {sym} I({c}))", (a,), folds=True)
        if choice == 8:
            c, sym = r.randrange(0, 63), r.choice(["<<", ">>"])
            return Ex(f"({{}} {sym} {c})", f"({{}} {sym} I({c}))", (a,), folds=True)
        if choice == 9:
            return Ex("(-{})", "(-{})", (a,), folds=True)
        if choice == 10:
            fn = r.choice(["min", "max"])
            return Ex(f"{fn}({{}}, {{}})", f"{fn}({{}}, {{}})", (a, b))
        if choice == 11 and "casts" in env["features"]:
            return Ex("int({})", "SAT({})", (self.float_expr(env, depth + 1),))
        if choice == 12:
            return Ex("h({})", "h({})", (a,))
        if choice == 13:
            return Ex("g({})", "g({})", (a,))
        if choice == 14:
            return Ex("gf({})", "gf({})", (a,))
        if choice == 15:
            return Ex("({} if {} else {})", "({} if {} else {})", (a, self.cond(env, depth + 1), b))
        if choice == 16:
            return Ex("({} + s)", "int_plus_s({}, s)", (a,))
        if choice == 17 and env["ctx"]:
            return Ex("({} - p)", "int_minus_p({}, p)", (a,))
        if choice == 18:
            return Ex("abs({})", "abs({})", (a,))
        return Ex(
            "({} * 6364136223846793005 + 1442695040888963407)",
            "({} * I(6364136223846793005) + I(1442695040888963407))",
            (a,),
            folds=True,
        )

    def float_expr(self, env, depth: int = 0) -> Ex:
        r = self.r
        if depth >= 3 or r.random() < 0.3:
            choice = r.randrange(5)
            if choice == 0:
                return lit(r.choice([0.5, -2.25, 3.0, 1e30, -1e30, 1e300, -0.0, math.inf, -math.inf, 9.3e18, -9.3e18]))
            if choice == 1:
                return Ex("fs[({}) % 16]", "fs[({}) % I(16)]", (self.int_small(env),), "f")
            if choice == 2:
                return Ex("float({})", "float({})", (self.int_leaf(env),), "f")
            return leaf(r.choice(env["floats"] + ["q.b", "s.b"]), None, "f")
        a = self.float_expr(env, depth + 1)
        b = self.float_expr(env, depth + 1)
        choice = r.randrange(9)
        if choice < 4:
            sym = r.choice(["+", "-", "*"])
            return Ex(f"({{}} {sym} {{}})", f"({{}} {sym} {{}})", (a, b), "f")
        if choice == 4:
            return Ex("({} / 3.0)", "({} / 3.0)", (a,), "f")
        if choice == 5:
            return Ex("math.sqrt(abs({}))", "SQRT(abs({}))", (a,), "f")
        if choice == 6 and "fmod" in env["features"]:
            return Ex("math.fmod({}, 3.0)", "FMOD({}, 3.0)", (a,), "f")
        if choice == 7:
            return Ex("gf({})", "gf({})", (a,), "f")
        return Ex("(-{})", "(-{})", (a,), "f")

    def cond(self, env, depth: int = 0) -> Ex:
        r = self.r
        choice = r.randrange(8)
        if choice < 3 or depth >= 3:
            sym = r.choice(["<", "<=", "==", "!=", ">"])
            return Ex(f"({{}} {sym} {{}})", f"({{}} {sym} {{}})", (self.int_expr(env, 2), self.int_expr(env, 2)), "c")
        if choice == 3:
            sym = r.choice(["<", "=="])
            return Ex(
                f"({{}} {sym} {{}})", f"({{}} {sym} {{}})", (self.float_expr(env, 2), self.float_expr(env, 2)), "c"
            )
        if choice == 4:
            return Ex("(q < s)", "s_lt(q, s)", (), "c")
        if choice == 5:
            sym = r.choice(["and", "or"])
            return Ex(
                f"({{}} {sym} {{}})", f"({{}} {sym} {{}})", (self.cond(env, depth + 1), self.cond(env, depth + 1)), "c"
            )
        if choice == 6:
            return Ex("(not {})", "(not {})", (self.cond(env, depth + 1),), "c")
        return Ex("(g({}) > 3)", "(g({}) > I(3))", (self.int_small(env),), "c")

    # statements

    def stmt(self, env, depth: int, top: bool = False) -> St:
        r = self.r
        choice = r.randrange(16)
        if choice < 3:
            return self._assign(env)
        if choice < 5 and env.get("slots", True):
            j = r.randrange(K)
            return St(f"out[o + {j}] = {{}}", f"out[o + I({j})] = {{}}", (self.int_expr(env),))
        if choice == 5 and env.get("slots", True):
            j = r.randrange(K)
            return St(f"fout[o + {j}] = {{}}", f"fout[o + I({j})] = {{}}", (self.float_expr(env),))
        if choice == 6:
            fn, slot = r.choice([("add", 0), ("add", 1), ("max", 2), ("min", 3)])
            return St(
                f"cuda.atomic.{fn}(cnt, {slot}, {{}})", f"cuda.atomic.{fn}(cnt, {slot}, {{}})", (self.int_expr(env),)
            )
        if choice == 7:
            f = r.choice(env["floats"])
            return St(f"{f} = {{}}", f"{f} = {{}}", (self.float_expr(env),))
        if choice == 8 and depth < 2:
            body = self.body(env, depth + 1, r.randrange(1, 4))
            orelse = self.body(env, depth + 1, r.randrange(1, 3)) if r.random() < 0.4 else None
            return St("if {}:", "if {}:", (self.cond(env),), body, orelse)
        if choice == 9 and depth < 2:
            c = r.randrange(1, 4)
            inner = dict(env, ints=env["ints"] + ["k"])
            return St(
                f"for k in range({c}):", f"for k in RANGE({c}):", (), self.body(inner, depth + 1, r.randrange(1, 3))
            )
        if choice == 10:
            op = r.choice(
                [
                    ("q = q + s", "q = s_add(q, s)"),
                    ("q = q - S({}, {})", "q = s_sub(q, S({}, {}))"),
                    ("q = -q", "q = s_neg(q)"),
                ]
            )
            exprs = (self.int_small(env), self.float_expr(env, 2)) if "{}" in op[0] else ()
            return St(op[0], op[1], exprs)
        if choice == 11 and env["ctx"]:
            return r.choice([St("pq = p + p", "pq = p_add(p, p)"), St("pq = abs(p)", "pq = p_abs(p)")])
        if choice == 12:
            return St("g({})", "g({})", (self.int_expr(env, 1),))
        if choice == 13 and env.get("la"):
            return self._la(env)
        if choice == 14 and top and env.get("sh") and env.get("phases"):
            return St(
                "cuda.syncthreads()\nsh[t] = {}\ncuda.syncthreads()",
                "yield\nsh[t] = {}\nyield",
                (self.int_expr({**env, "sh": False}),),  # no read of sh while the phase writes it (a race)
            )
        return self._assign(env)

    def _assign(self, env) -> St:
        v = self.r.choice(env["vars"])
        return St(f"{v} = {{}}", f"{v} = {{}}", (self.int_expr(env),))

    def _la(self, env) -> St:
        j = self.r.randrange(4)
        return St(f"la[{j}] = {{}}", f"la[{j}] = {{}}", (self.int_expr(env),))

    def body(self, env, depth: int, count: int, top: bool = False) -> list[St]:
        return [self.stmt(env, depth, top) for _ in range(count)]

    # kernels

    def kernel(self, name: str, features: frozenset[str]) -> Kernel:
        r = self.r
        seed = f"{r.getrandbits(32):08x}"
        shape = r.choice(["if", "if", "return", "nested", "walrus", "stride", "tid", "2d", "2d", "3d"])
        ctx = "contexts" in features and r.random() < 0.35
        barrier = "barriers" in features and shape in ("if", "return", "nested") and r.random() < 0.3
        dims = {"2d": 2, "3d": 3}.get(shape, 1)
        if dims == 1:
            blocks, threads = (r.randint(1, 3),), (r.choice([1, 3, 16, 32, 50, 64]),)
        elif dims == 2:
            blocks, threads = (r.randint(1, 2), r.randint(1, 3)), (r.randint(1, 8), r.randint(1, 6))
        else:
            blocks, threads = tuple(r.randint(1, 2) for _ in range(3)), tuple(r.randint(1, 4) for _ in range(3))
        total = math.prod(blocks) * math.prod(threads)
        near = [0, 1, total // 2, total - 1, total, total + 3, -2, r.randrange(0, 2 * total + 2)]
        n = r.choice(near + ([10**12, 2**62] if shape != "stride" else []))
        m = r.choice(near + [3])
        outn = max(total, max(n, 0) if shape == "stride" else 0)
        idx = {1: ["i"], 2: ["x", "y"], 3: ["x", "y", "z"]}[dims]
        env = {
            "ints": ["v0", "v1", "v2", *idx] + (["t"] if barrier else []),
            "vars": ["v0", "v1", "v2"],
            "floats": ["f0", "f1"],
            "ctx": ctx,
            "features": features,
            "la": "local" in features and r.random() < 0.3,
            "sh": barrier,
            "phases": barrier and shape == "return",
        }
        body = self.prologue(shape, env, dims)
        if shape != "walrus":  # (no index yet)
            # before the guard: effects or not; a grid-stride loop names its slots ('o') only inside the loop
            body += self.body(dict(env, slots=shape != "stride"), 1, r.randrange(0, 3))
        body += self.guarded(shape, env, dims, barrier)
        return Kernel(name, body, blocks, threads, n, m, ctx, outn, seed, shape)

    def prologue(self, shape: str, env, dims: int) -> list[St]:
        fixed = []

        def add(od: str, ref: str | None = None) -> None:
            fixed.append(
                St(
                    od.replace("{", "{{").replace("}", "}}"),
                    (od if ref is None else ref).replace("{", "{{").replace("}", "}}"),
                    fixed=True,
                )
            )

        if shape == "tid":
            add("i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x")
            add("o = (i + 0) * 4", "o = i * I(4)")
            env["ints"][env["ints"].index("i")] = "ii"
            add("ii = i + 0", "ii = i")
        elif shape == "walrus":
            env["ints"].remove("i")
        elif dims == 1:
            add("i = cuda.grid(1)")
            if shape != "stride":
                add("o = i * 4", "o = i * I(4)")
        elif dims == 2:
            add("x, y = cuda.grid(2)")
            add("gw, gh = cuda.gridsize(2)")
            add("o = (y * gw + x) * 4", "o = (y * gw + x) * I(4)")
        else:
            add("x, y, z = cuda.grid(3)")
            add("gw, gh, gd = cuda.gridsize(3)")
            add("o = ((z * gh + y) * gw + x) * 4", "o = ((z * gh + y) * gw + x) * I(4)")
        add("v0 = 1", "v0 = I(1)")
        add("v1 = n")
        add("v2 = m")
        add("f0 = 0.5")
        add("f1 = fs[3]")
        add("q = S(v0, f0)")
        if env["la"]:
            add("la = cuda.local.array(4, np.int64)", "la = cuda.local.array(4, np.int64)")
            for j in range(4):
                add(f"la[{j}] = {j}", f"la[{j}] = I({j})")
        if env["sh"]:
            add("t = cuda.threadIdx.x + 0", "t = cuda.threadIdx.x")
            add("bd = cuda.blockDim.x + 0", "bd = cuda.blockDim.x")
            add("sh = cuda.shared.array(64, np.int64)")
            # no read of sh in the phase that writes it: another thread's slot may or may not be written yet (a race)
            fixed.append(St("sh[t] = {}", "sh[t] = {}", (self.int_expr({**env, "sh": False}),), fixed=True))
            fixed.append(St("cuda.syncthreads()", "yield", fixed=True))
        return fixed

    def bound(self, env) -> tuple[str, str]:
        """A bound of an index: an expression of the arguments alone."""
        return self.r.choice(
            [
                ("n", "n"),
                ("n", "n"),
                ("m", "m"),
                ("xs.size", "I(xs.size)"),
                ("(n - 1)", "(n - I(1))"),
                ("min(n, m)", "min(n, m)"),
                ("d", "d"),
                ("(m + s)", "int_plus_s(m, s)"),
                ("h(n)", "h(n)"),
            ]
        )

    def guarded(self, shape: str, env, dims: int, barrier: bool) -> list[St]:
        r = self.r
        body = self.body(env, 1, r.randrange(1, 5))
        bod, bref = self.bound(env)
        extra = self.cond(env, 2)
        if shape in ("if", "tid"):
            form = r.randrange(4)
            if form == 0:
                return [St(f"if i < {bod}:", f"if i < {bref}:", (), body)]
            if form == 1:
                return [St(f"if {bod} > i:", f"if {bref} > i:", (), body)]
            if form == 2:
                return [St(f"if i < {bod} and {{}}:", f"if i < {bref} and {{}}:", (extra,), body)]
            return [
                St(
                    f"if i <= {bod} - 1:",
                    f"if i <= {bref} - I(1):",
                    (),
                    body,
                    self.body(env, 1, 1) if r.random() < 0.3 else None,
                )
            ]
        if shape == "return":
            form = r.randrange(3)
            heads = [
                (f"if i >= {bod}:\n    return", f"if i >= {bref}:\n    return"),
                (f"if i >= {bod} or {{}}:\n    return", f"if i >= {bref} or {{}}:\n    return"),
                (f"if not (i < {bod}):\n    return", f"if not (i < {bref}):\n    return"),
            ]
            return [St(*heads[form], (extra,) if form == 1 else ()), *self.body(env, 1, r.randrange(1, 5), top=True)]
        if shape == "nested":
            inner = St("if {}:", "if {}:", (extra,), body)
            return [St(f"if i < {bod}:", f"if i < {bref}:", (), [*self.body(env, 2, r.randrange(0, 2)), inner])]
        if shape == "walrus":
            return [
                St(
                    f"if (i := cuda.grid(1)) < {bod}:",
                    f"if (i := cuda.grid(1)) < {bref}:",
                    (),
                    [St("o = i * 4", "o = i * I(4)", fixed=True), *body],
                )
            ]
        if shape == "stride":
            step = St("o = i * 4", "o = i * I(4)", fixed=True)
            incr = St("i += cuda.gridsize(1)", "i += cuda.gridsize(1)", fixed=True)
            return [St("while i < n:", "while i < n:", (), [step, *body, incr], fixed=True)]
        names = ["x", "y", "z"][:dims]
        bounds = [("n", "n"), ("m", "m"), ("d", "d")]
        form = r.randrange(3)
        if form == 0:
            test = " and ".join(f"{v} < {b[0]}" for v, b in zip(names, bounds))
            return [St(f"if {test}:", f"if {test}:", (), body)]
        if form == 1:
            test = " or ".join(f"{v} >= {b[0]}" for v, b in zip(names, bounds))
            return [St(f"if {test}:\n    return", f"if {test}:\n    return"), *body]
        nested: list[St] = body
        for v, b in reversed(list(zip(names, bounds))):
            nested = [St(f"if {v} < {b[0]}:", f"if {v} < {b[0]}:", (), nested)]
        return nested


# --- modules, runs and the reference ---------------------------------------------------------------------------

_modules = itertools.count()
_tmp = Path(tempfile.mkdtemp(prefix="kfuzz-"))


_header: list[types.ModuleType] = []


def module_source(kernels: list[Kernel]) -> str:
    """A module of the kernels that stands alone (the header's definitions, then the kernels)."""
    return HEADER + "\n\n" + "\n\n".join(k.source() for k in kernels)


def _load(name: str, source: str) -> types.ModuleType:
    """A module from source written to a file (messages name its lines). It is compiled here, under this
    file's ``from __future__ import annotations``, as a user's module may be: struct methods annotated
    ``o: "S"`` then hold ``"'S'"`` (a case the fuzzer found)."""
    path = _tmp / f"{name}.py"
    path.write_text(source)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), vars(module))
    return module


def make_module(kernels: list[Kernel]) -> types.ModuleType:
    """The kernels' module. It imports the header's definitions from one module per process, so that the
    methods, hooks and structs every kernel calls compile once per process, not once per batch."""
    if not _header:
        _header.append(_load(f"kfuzz_{os.getpid()}_header", HEADER))
    body = "\n\n".join(k.source() for k in kernels)
    return _load(f"kfuzz_{os.getpid()}_{next(_modules)}", f"from {_header[0].__name__} import *  # noqa\n\n{body}")


def inputs(kernel: Kernel, module) -> dict:
    """The launch's arrays and values, from the kernel's own seed."""
    r = random.Random(kernel.seed)
    special = [0, 1, -1, 7, INT64_MAX, INT64_MIN, 2**32, -(2**40)]
    xs = np.array([r.choice(special) if r.random() < 0.4 else r.randrange(-1000, 1000) for _ in range(L)], np.int64)
    fspecial = [0.0, -0.0, 1.5, math.inf, -math.inf, math.nan, 1e30, -1e30, 1e300, 9.3e18]
    fs = np.array([r.choice(fspecial) if r.random() < 0.5 else r.uniform(-100, 100) for _ in range(L)])
    sa, sb, pa, pb = r.randrange(-50, 50), r.uniform(-4, 4), r.randrange(-50, 50), r.uniform(-4, 4)
    return {"xs": xs, "fs": fs, "s": (sa, sb), "p": (pa, pb)}


def run_overdub(module, kernel: Kernel, target: str = "cpu", debug: bool | None = None) -> dict:
    import overdub as od

    data = inputs(kernel, module)
    xp = np
    if target == "cuda":
        import cupy as xp  # type: ignore[no-redef]
    out = xp.zeros(kernel.outn * K, np.int64)
    fout = xp.zeros(kernel.outn * K, np.float64)
    cnt, state = xp.zeros(4, np.int64), xp.zeros(STATE, np.int64)
    args = (out, fout, cnt, xp.asarray(data["xs"]), xp.asarray(data["fs"]), kernel.n, kernel.m)
    args += (module.S(*data["s"]), module.P(*data["p"]))
    launch = {"blocks": kernel.blocks, "threads": kernel.threads, "target": target, "debug": debug}
    if kernel.ctx:
        launch.update(context=module.fz, state=state)
    od.cuda(getattr(module, kernel.name), *args, **launch)
    result = {"out": out, "fout": fout, "cnt": cnt, "state": state}
    return {k: (v.get() if target == "cuda" else v) for k, v in result.items()}


class _Struct:
    __slots__ = ("kind", "a", "b")

    def __init__(self, kind, a, b):
        self.kind, self.a, self.b = kind, np.int64(a), np.float64(b)


def saturate(x) -> np.int64:
    """CUDA's float64 -> int64 (``cvt.rzi.s64.f64``): truncation, saturating; NaN gives INT64_MIN."""
    x = float(x)
    if math.isnan(x) or x < -(2.0**63):
        return np.int64(INT64_MIN)
    if x >= 2.0**63:
        return np.int64(INT64_MAX)
    return np.int64(int(x))


class FakeCuda:
    """The part of numba.cuda the generated kernels use, for one thread at a time of a plain-Python grid."""

    def __init__(self, blocks, threads):
        self.gdim = tuple(blocks) + (1,) * (3 - len(blocks))
        self.bdim = tuple(threads) + (1,) * (3 - len(threads))
        self.blockDim, self.gridDim = self._dim3(self.bdim), self._dim3(self.gdim)
        self.atomic = types.SimpleNamespace(add=self._add, max=self._max, min=self._min)
        self.shared = types.SimpleNamespace(array=self._shared)
        self.local = types.SimpleNamespace(array=lambda shape, dtype: np.zeros(shape, dtype))
        self.block_memory: dict = {}

    @staticmethod
    def _dim3(v):
        return types.SimpleNamespace(x=np.int64(v[0]), y=np.int64(v[1]), z=np.int64(v[2]))

    def at(self, block, thread):
        self.blockIdx, self.threadIdx = self._dim3(block), self._dim3(thread)

    def grid(self, n):
        g = [self.blockIdx.x * self.blockDim.x + self.threadIdx.x, self.blockIdx.y * self.blockDim.y + self.threadIdx.y]
        g.append(self.blockIdx.z * self.blockDim.z + self.threadIdx.z)
        return g[0] if n == 1 else tuple(g[:n])

    def gridsize(self, n):
        g = [np.int64(a * b) for a, b in zip(self.gdim, self.bdim)]
        return g[0] if n == 1 else tuple(g[:n])

    def _shared(self, shape, dtype):
        key = sys._getframe(1).f_lineno
        if key not in self.block_memory:
            self.block_memory[key] = np.full(shape, -12345, dtype)
        return self.block_memory[key]

    @staticmethod
    def _add(a, i, v):
        a[i] = a[i] + v

    @staticmethod
    def _max(a, i, v):
        a[i] = max(a[i], v)

    @staticmethod
    def _min(a, i, v):
        a[i] = min(a[i], v)


def reference_namespace() -> dict:
    ns: dict = {
        "np": np,
        "math": math,
        "I": np.int64,
        "SAT": saturate,
        "SQRT": np.sqrt,
        "FMOD": np.fmod,
        "RANGE": lambda c: (np.int64(k) for k in range(c)),
        "_Struct": _Struct,
    }
    exec(compile(REF_HEADER, "<fuzz reference>", "exec"), ns)
    return ns


def run_reference(kernel: Kernel) -> dict:
    """The kernel's reference source run for every block and thread, in order; a barrier is a ``yield``."""
    ns = reference_namespace()
    exec(compile(kernel.source(ref=True), f"<reference {kernel.name}>", "exec"), ns)
    data = inputs(kernel, None)
    cuda = FakeCuda(kernel.blocks, kernel.threads)
    out, fout = np.zeros(kernel.outn * K, np.int64), np.zeros(kernel.outn * K, np.float64)
    cnt, state = np.zeros(4, np.int64), np.zeros(STATE, np.int64)

    def count(slot, v):
        if kernel.ctx:
            state[slot] += v

    ns.update(cuda=cuda, od=types.SimpleNamespace(count=count, ctx=kernel.ctx))
    if not kernel.ctx:
        ns["g"] = lambda x: x ^ np.int64(6)
        ns["RD"] = lambda a, i: a[i]
    s, p = ns["S"](*data["s"]), ns["P"](*data["p"])
    args = (out, fout, cnt, data["xs"], data["fs"], np.int64(kernel.n), np.int64(kernel.m), s, p)
    fn = ns[kernel.name]
    with np.errstate(all="ignore"):
        for block in itertools.product(*(range(b) for b in reversed(cuda.gdim))):
            cuda.block_memory = {}
            threads = list(itertools.product(*(range(t) for t in reversed(cuda.bdim))))
            live = []
            for thread in threads:
                cuda.at(block[::-1], thread[::-1])
                result = fn(*args)
                if result is not None:  # a generator: a kernel with barriers
                    live.append((thread, result))
            while live:
                still = []
                for thread, gen in live:
                    cuda.at(block[::-1], thread[::-1])
                    try:
                        next(gen)
                        still.append((thread, gen))
                    except StopIteration:
                        pass
                live = still
    return {"out": out, "fout": fout, "cnt": cnt, "state": state}


# --- comparing ---------------------------------------------------------------------------------------------------


def differences(expected: dict, got: dict, exact: bool = True) -> list[str]:
    found = []
    for key in expected:
        a, b = expected[key], got[key]
        if key == "fout":
            same = np.array_equal(a, b, equal_nan=True) if exact else np.allclose(a, b, rtol=1e-9, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        if not same:
            where = np.flatnonzero(~np.isclose(a, b, equal_nan=True) if key == "fout" else a != b)[:6]
            found.append(f"{key}[{list(where)}]: expected {a[where].tolist()}, got {b[where].tolist()}")
    return found


@dataclasses.dataclass
class Divergence:
    kernel: Kernel
    variant: str  # "guard", "debug" or "cuda"
    detail: str
    signature: tuple[str, ...]

    def report(self) -> str:
        k = self.kernel
        head = f"divergence ({self.variant}) in {k.name}, seed {k.seed}, blocks={k.blocks} threads={k.threads} "
        head += f"n={k.n} m={k.m} ctx={k.ctx}: {self.detail}"
        return head + "\n" + k.source()


def error_summary(error: BaseException) -> str:
    """The first line of an error's message and the first line that says what went wrong (numba's message
    starts with 'compiling kernel ...' and 'Failed in ... pipeline' lines)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines[1:] if not line.startswith(("Failed in", "During:", "File ", "<source"))]
    return " / ".join(line[:300] for line in lines[:1] + said[:1])


def check(module, kernel: Kernel, targets: tuple[str, ...] = ("cpu",), only: str | None = None) -> list[Divergence]:
    """Run one kernel on every variant (or the variant ``only``) and compare each with the reference; the
    divergences found."""
    expected = run_reference(kernel)
    variants = [("guard", "cpu", None), ("debug", "cpu", True)] + [
        ("cuda", "cuda", None) for t in targets if t == "cuda"
    ]
    variants = [v for v in variants if only in (None, v[0])]
    found = []
    for variant, target, debug in variants:
        try:
            got = run_overdub(module, kernel, target, debug)
        except Exception as error:  # any error of a kernel the reference runs is a divergence
            detail = f"{type(error).__name__}: {error_summary(error)}"
            found.append(Divergence(kernel, variant, detail, (variant, type(error).__name__)))
            continue
        diffs = differences(expected, got, exact=target == "cpu")
        if diffs:
            found.append(Divergence(kernel, variant, "; ".join(diffs), (variant, "mismatch")))
    if (
        kernel.shape == "walrus"
        and only is None
        and len(found) == len(variants)
        and all(d.signature[1] == "CompileError" for d in found)
    ):
        REFUSED.append(kernel.name)  # numba cannot type a walrus in a condition (Python 3.11's COPY): refused
        return []  # loudly by every variant alike, which is not a wrong result
    return found


REFUSED: list[str] = []


def generate(seed: int, count: int, features: frozenset[str] | None = None) -> list[Kernel]:
    features = FEATURES if features is None else features
    gen = Generator(random.Random(seed))
    return [gen.kernel(f"k{seed}_{j}", features) for j in range(count)]


FEATURES = frozenset({"contexts", "barriers", "local", "casts", "fmod"})


def fuzz(seed: int, count: int, batch: int = 8, targets=("cpu",), features=None, log=None) -> list[Divergence]:
    """Generate ``count`` kernels from ``seed``, ``batch`` to a module, and check each; the divergences."""
    kernels = generate(seed, count, features)
    found: list[Divergence] = []
    for start in range(0, count, batch):
        chunk = kernels[start : start + batch]
        module = make_module(chunk)
        for kernel in chunk:
            for divergence in check(module, kernel, targets):
                found.append(divergence)
                if log:
                    log(divergence.report())
    return found


# --- shrinking ------------------------------------------------------------------------------------------------------


def _expr_candidates(e: Ex):
    """Smaller expressions for ``e``: its operands of its kind, then the kind's simplest."""
    for kid in e.kids:
        if kid.kind == e.kind:
            yield kid
    if e.kind in ZERO and (e.kids or e.fod not in (ZERO[e.kind].fod,)):
        yield ZERO[e.kind]
    for j, kid in enumerate(e.kids):
        for smaller in _expr_candidates(kid):
            yield dataclasses.replace(e, kids=e.kids[:j] + (smaller,) + e.kids[j + 1 :])


def _body_candidates(body: list[St]):
    for j, st in enumerate(body):
        if not st.fixed:
            yield body[:j] + body[j + 1 :]
            if st.body is not None:
                yield body[:j] + st.body + body[j + 1 :]
        if st.orelse:
            yield body[:j] + [dataclasses.replace(st, orelse=None)] + body[j + 1 :]
        if st.body is not None:
            for inner in _body_candidates(st.body):
                yield body[:j] + [dataclasses.replace(st, body=inner)] + body[j + 1 :]
        if st.orelse:
            for inner in _body_candidates(st.orelse):
                yield body[:j] + [dataclasses.replace(st, orelse=inner)] + body[j + 1 :]
        for i, e in enumerate(st.exprs):
            for smaller in _expr_candidates(e):
                yield (
                    body[:j]
                    + [dataclasses.replace(st, exprs=st.exprs[:i] + (smaller,) + st.exprs[i + 1 :])]
                    + body[j + 1 :]
                )


def shrink(divergence: Divergence, targets=("cpu",), budget: int = 400, seconds: float | None = None) -> Divergence:
    """The smallest kernel found (removing, hoisting and simplifying while the divergence persists), within
    ``budget`` tries and ``seconds``; each try runs the diverging variant alone."""
    import time

    end = None if seconds is None else time.monotonic() + seconds
    best, tries = divergence, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for body in _body_candidates(best.kernel.body):
            tries += 1
            if tries > budget or (end is not None and time.monotonic() > end):
                tries = budget
                break
            candidate = dataclasses.replace(best.kernel, body=body)
            try:
                found = check(make_module([candidate]), candidate, targets, only=best.variant)
                again = [d for d in found if d.signature == best.signature]
            except Exception:  # the reference itself failed: not a smaller case of this divergence
                continue
            if again:
                best, progress = again[0], True
                break
    return best


# --- runs: one process or several --------------------------------------------------------------------------------

BATCH = 8
"""Kernels per seed: a run of COUNT kernels from SEED checks seeds SEED, SEED + 1, ..., BATCH kernels each (the
last one fewer), whatever the number of processes, so any run's divergences reproduce from their seed alone."""


def batches(seed: int, count: int) -> list[tuple[int, int]]:
    """(seed, kernels) for each batch of a run."""
    return [(seed + b, min(BATCH, count - b * BATCH)) for b in range(-(-count // BATCH))]


def run_batches(work: list[tuple[int, int]], targets=("cpu",), shrink_seconds: float = 60.0, emit=print) -> None:
    """Check each batch and emit one JSON record of it: seed, kernels, refused, divergences (shrunk while
    ``shrink_seconds`` last in this process, the first of each signature only), seconds."""
    import json
    import time

    left = shrink_seconds
    seen: set[tuple[str, ...]] = set()
    for seed, count in work:
        start, refused = time.monotonic(), len(REFUSED)
        reports = []
        for d in fuzz(seed, count, targets=targets):
            if d.signature not in seen and left > 0:
                seen.add(d.signature)
                shrinking = time.monotonic()
                d = shrink(d, targets, seconds=left)
                left -= time.monotonic() - shrinking
            reports.append(d.report())
        record = {"seed": seed, "kernels": count, "refused": REFUSED[refused:], "divergences": reports}
        emit(json.dumps(dict(record, seconds=round(time.monotonic() - start, 2))))


@dataclasses.dataclass
class Summary:
    """What a run found."""

    seed: int
    kernels: int
    targets: tuple[str, ...]
    processes: int
    divergences: list[str] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)
    wall: float = 0.0

    def line(self) -> str:
        seeds = f"seeds {self.seed}..{self.seed + len(batches(self.seed, self.kernels)) - 1}"
        return (
            f"{self.kernels} kernels ({seeds}, {BATCH} a seed; variants guard, debug"
            f"{', cuda' if 'cuda' in self.targets else ''} against the reference), {len(self.divergences)} "
            f"divergences, {len(self.refused)} refused, {self.wall:.0f} s wall in {self.processes} processes"
        )


def run(seed: int, count: int, targets=("cpu",), processes: int = 1, shrink_seconds: float = 60.0, out=None):
    """Check ``count`` kernels from ``seed`` in ``processes`` subprocesses (interleaved seeds: disjoint, and
    balanced); progress, every divergence and the summary go to ``out`` (a text stream) as they come."""
    import json
    import subprocess
    import threading
    import time

    out = out or sys.stdout
    summary = Summary(seed, count, tuple(targets), processes)
    work = batches(seed, count)
    started, lock, done = time.monotonic(), threading.Lock(), [0]

    def say(text: str) -> None:
        with lock:
            out.write(text + "\n")
            out.flush()

    def take(line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return say(line.rstrip())  # a worker's own output (a warning): kept in the log
        with lock:
            done[0] += record["kernels"]
            summary.refused += record["refused"]
            summary.divergences += record["divergences"]
        for report in record["divergences"]:
            say(report)
        say(
            f"[{time.monotonic() - started:6.0f} s] seed {record['seed']}: {record['kernels']} kernels in "
            f"{record['seconds']} s; {done[0]}/{count} kernels, {len(summary.divergences)} divergences, "
            f"{len(summary.refused)} refused"
        )

    say(f"fuzz: {count} kernels from seed {seed}, targets {','.join(targets)}, {processes} processes")
    env = dict(os.environ, OVERDUB_CACHE="0", PYTHONUNBUFFERED="1")  # generated kernels: never the user's cache
    workers = []
    for p in range(processes):
        mine = ",".join(f"{s}:{c}" for s, c in work[p::processes])
        if not mine:
            continue
        command = [sys.executable, __file__, "--worker", mine, "--target", ",".join(targets)]
        command += ["--shrink-seconds", str(shrink_seconds)]
        worker = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=lambda w=worker: [take(line) for line in w.stdout], daemon=True)
        reader.start()
        workers.append((worker, reader))
    for worker, reader in workers:
        worker.wait()
        reader.join()
        if worker.returncode:
            summary.divergences.append(f"a worker process exited with status {worker.returncode}")
    if done[0] != count:
        summary.divergences.append(f"only {done[0]} of {count} kernels were checked")
    summary.wall = time.monotonic() - started
    say(summary.line())
    return summary


def main(argv: list[str]) -> int:
    """``python tests/fuzz_kernels.py SEED [COUNT] [--target cuda] [--processes N] [--shrink-seconds S]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="fuzz_kernels.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", type=int, nargs="?", default=0)
    parser.add_argument("count", type=int, nargs="?", default=BATCH)
    parser.add_argument("--target", default="cpu", help="'cuda' (or 'cpu,cuda') adds the CUDA target")
    parser.add_argument("--processes", type=int, default=int(os.environ.get("OVERDUB_FUZZ_PROCESSES", "1")))
    parser.add_argument("--shrink-seconds", type=float, default=60.0, help="time each process spends shrinking")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    targets = ("cpu", "cuda") if "cuda" in args.target else ("cpu",)
    if args.worker:
        work = [tuple(int(x) for x in item.split(":")) for item in args.worker.split(",")]
        run_batches(work, targets, args.shrink_seconds, emit=lambda line: print(line, flush=True))
        return 0
    summary = run(args.seed, args.count, targets, max(1, args.processes), args.shrink_seconds)
    return 1 if summary.divergences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
