"""od.method: methods added to existing callables (operator.add, operator.getitem, abs, math.sin) for new
types; operators in kernels as calls of the operator functions, reaching those methods, context overdubs and
class dunders; invalidation; built-in types untouched. CPU target.

The new types here are numba record types (a structured numpy array's element) and ``od.Ptr``. Methods added
to the operator functions are process-wide, so each test adds them only for a record type of its own (a
dtype with a fresh field name), which no other test's kernels use.
"""

import itertools
import math
import operator
import threading

import numpy as np
import pytest
from numba.np import numpy_support

import overdub as od
from helpers import compiles, unique_name
from overdub import settings

_fields = itertools.count()


def record_dtype():
    """A structured dtype no other test uses: its numba record type is a new type."""
    n = next(_fields)
    return np.dtype([(f"re{n}", np.float64), (f"im{n}", np.float64)])


def record_type(dtype):
    return numpy_support.from_dtype(dtype)


def records(dtype, *pairs):
    array = np.zeros(len(pairs), dtype=dtype)
    for i, (re, im) in enumerate(pairs):
        array[i] = (re, im)
    return array


@pytest.fixture
def rec(make_module):
    """A module with a fresh record type ``R`` (fields ``re``, ``im`` by position) and kernels using it."""
    dtype = record_dtype()
    re, im = dtype.names
    m = make_module(
        f"""
        import math
        import operator
        import overdub as od
        from numba.np import numpy_support
        import numpy as np

        DTYPE = np.dtype([("{re}", np.float64), ("{im}", np.float64)])
        R = numpy_support.from_dtype(DTYPE)

        def re(r):
            return r.{re}

        def im(r):
            return r.{im}

        def add_kernel(out, rs):
            out[0] = rs[0] + rs[1]

        def radd_kernel(out, rs):
            out[0] = 1.5 + rs[0]

        def sin_kernel(out, rs):
            out[0] = math.sin(rs[0])

        def abs_kernel(out, rs):
            out[0] = abs(rs[0])

        def getitem_kernel(out, rs):
            r = rs[0]
            out[0] = r[0]
            out[1] = r[1]

        def neg_kernel(out, rs):
            out[0] = -rs[0]

        def lt_kernel(out, rs):
            out[0] = rs[0] < rs[1]

        def iadd_kernel(out, rs):
            acc = rs[0]
            acc += rs[1]
            out[0] = acc
    """,
        prefix="rec",
    )
    return m


# --- methods on callables that are not generic functions ------------------------------------------------


def test_a_method_on_operator_add_is_what_a_plus_b_of_new_types_reaches(rec):
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: R):
            return re(a) * re(b) + im(a) * im(b)
    """)
    out = np.zeros(1)
    od.cuda(rec.add_kernel, out, records(rec.DTYPE, (2, 3), (5, 7)))
    assert out.tolist() == [2 * 5 + 3 * 7]


def test_other_calls_of_operator_add_reach_the_original(rec):
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: R):
            return 0.0

        def float_kernel(out, x):
            out[0] = x[0] + x[1]
            out[1] = operator.add(x[0], 1.0)
    """)
    out = np.zeros(2)
    od.cuda(rec.float_kernel, out, np.array([1.5, 2.0]))
    assert out.tolist() == [3.5, 2.5]


def test_a_method_on_math_sin_for_a_new_type_reaches_the_original_inside_it(rec):
    rec.run("""
        @od.method(math.sin)
        def sin(r: R):
            return math.sin(re(r)) + im(r)      # math.sin of a float: the original
    """)
    out = np.zeros(1)
    od.cuda(rec.sin_kernel, out, records(rec.DTYPE, (0.5, 10.0)))
    assert out[0] == pytest.approx(math.sin(0.5) + 10.0)


def test_a_method_on_abs_for_a_new_type(rec):
    rec.run("""
        @od.method(abs)
        def norm(r: R):
            return math.sqrt(re(r) * re(r) + im(r) * im(r))
    """)
    out = np.zeros(1)
    od.cuda(rec.abs_kernel, out, records(rec.DTYPE, (3.0, 4.0)))
    assert out.tolist() == [5.0]


def test_a_method_on_operator_getitem_is_what_r_i_of_a_new_type_reaches(rec):
    rec.run("""
        @od.method(operator.getitem)
        def component(r: R, i: od.Integer):
            return re(r) if i == 0 else im(r)
    """)
    out = np.zeros(2)
    od.cuda(rec.getitem_kernel, out, records(rec.DTYPE, (3.0, 4.0)))
    assert out.tolist() == [3.0, 4.0]


def test_unary_minus_and_comparisons_reach_their_operator_methods(rec):
    rec.run("""
        @od.method(operator.neg)
        def neg(r: R):
            return -re(r)

        @od.method(operator.lt)
        def lt(a: R, b: R):
            return abs(re(a)) < abs(re(b))
    """)
    rs = records(rec.DTYPE, (-3.0, 0.0), (2.0, 0.0))
    out = np.zeros(1)
    od.cuda(rec.neg_kernel, out, rs)
    assert out.tolist() == [3.0]
    od.cuda(rec.lt_kernel, out, rs)
    assert out.tolist() == [0.0]


def test_power_not_and_in_reach_their_operator_methods(rec):
    rec.run("""
        @od.method(operator.pow)
        def power(r: R, n: od.Integer):
            return re(r) ** n + im(r)

        @od.method(operator.not_)
        def is_zero(r: R):
            return re(r) == 0 and im(r) == 0

        @od.method(operator.contains)
        def within(r: R, x: od.Float):
            return re(r) <= x <= im(r)

        def misc_kernel(out, rs):
            out[0] = rs[0] ** 3
            out[1] = not rs[0]
            out[2] = 1.5 in rs[0]
            out[3] = 9.5 not in rs[0]
    """)
    out = np.zeros(4)
    od.cuda(rec.misc_kernel, out, records(rec.DTYPE, (1.0, 2.0)))
    assert out.tolist() == [3.0, 0.0, 1.0, 1.0]


def test_a_plus_equals_b_asks_iadd_then_add(rec):
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: R):
            return re(a) + re(b)
    """)
    out = np.zeros(1)
    od.cuda(rec.iadd_kernel, out, records(rec.DTYPE, (1.0, 0.0), (2.0, 0.0)))
    assert out.tolist() == [3.0]
    rec.run("""
        @od.method(operator.iadd)
        def iadd(a: R, b: R):
            return 100.0
    """)
    od.cuda(rec.iadd_kernel, out, records(rec.DTYPE, (1.0, 0.0), (2.0, 0.0)))
    assert out.tolist() == [100.0]


def test_a_method_on_a_pointer_operator_wins_over_the_builtin_one(make_module):
    m = make_module(
        """
        import operator
        import overdub as od

        def kernel(out, p):
            out[0] = p[1]
    """,
        prefix="ptr_getitem",
    )
    x = np.array([10.0, 20.0, 30.0])
    out = np.zeros(1)
    od.cuda(m.kernel, out, od.pointer(x))
    assert out.tolist() == [20.0]
    m.run("""
        @od.method(operator.getitem)
        def shifted(p: od.Ptr[od.float64], i: od.Integer):
            return od.unsafe_load(p, i + 1)
    """)
    try:
        od.cuda(m.kernel, out, od.pointer(x))
        assert out.tolist() == [30.0]
    finally:
        m.run("""
            @od.method(operator.getitem)
            def shifted(p: od.Ptr[od.float64], i: od.Integer):
                return od.unsafe_load(p, i)     # leave the process-wide method harmless for other tests
        """)


def test_od_method_of_a_generic_function_defines_a_method_of_it():
    f = od.GenericFunction(unique_name("f"))
    f.define(lambda x: 1, sig=(od.Integer,))
    returned = od.method(f)(lambda x: 2.5)
    assert returned is f
    assert od.which(f, od.float64) is not None and len(f.methods) == 2


def test_od_method_refuses_classes_len_and_non_functions():
    with pytest.raises(TypeError, match="is a class"):
        od.method(int)
    with pytest.raises(TypeError, match="len"):
        od.method(len)
    with pytest.raises(TypeError, match="takes a def"):
        od.method(operator.add)(np.sin)


def test_no_method_for_an_operator_on_new_types_names_the_operator_types_and_line(rec):
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: od.Float):
            return re(a) + b
    """)
    with pytest.raises(od.MethodError) as info:
        od.cuda(rec.add_kernel, np.zeros(1), records(rec.DTYPE, (1, 2), (3, 4)))
    message = str(info.value)
    assert "no method matching add(" in message and "Record(" in message
    assert f"{rec.filename}:{rec.line_of('out[0] = rs[0] + rs[1]')}" in message


# --- invalidation ---------------------------------------------------------------------------------------


def test_redefining_an_operator_method_recompiles_the_kernels_that_reached_it(rec):
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: R):
            return 1.0
    """)
    out = np.zeros(1)
    rs = records(rec.DTYPE, (1, 2), (3, 4))
    od.cuda(rec.add_kernel, out, rs)
    before = compiles()
    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: R):
            return 2.0
    """)
    od.cuda(rec.add_kernel, out, rs)
    assert out.tolist() == [2.0] and compiles() == before + 1


def test_a_more_specific_method_takes_over_and_recompiles(make_module):
    m = make_module(
        """
        import math
        import overdub as od

        def kernel(out, p):
            out[0] = math.sin(p)
    """,
        prefix="specific",
    )
    m.run("""
        @od.method(math.sin)
        def sin(p: od.Ptr):
            return 1.0
    """)
    x = np.zeros(2)
    out = np.zeros(1)
    od.cuda(m.kernel, out, od.pointer(x))
    assert out.tolist() == [1.0]
    m.run("""
        @od.method(math.sin)
        def sin(p: od.Ptr[od.float64]):
            return 2.0
    """)
    od.cuda(m.kernel, out, od.pointer(x))
    assert out.tolist() == [2.0]
    od.cuda(m.kernel, out, od.pointer(np.zeros(2, dtype=np.int32)))
    assert out.tolist() == [1.0]


GATED = pytest.mark.skipif(
    settings.REROUTE.value() != "when-extended",
    reason="operators are rerouted whether or not a table has methods (OVERDUB_REROUTE)",
)


@GATED
def test_the_first_method_of_an_operator_recompiles_kernels_that_use_it_and_they_stay_right(make_module):
    m = make_module(
        """
        import overdub as od

        def kernel(out, x):
            out[0] = x[0] ^ x[1]
    """,
        prefix="first_method",
    )
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, np.array([6, 3]))
    n = compiles()
    R = record_type(record_dtype())
    od.method(operator.xor, sig=(R, R))(lambda a, b: 0)  # no other test adds methods to ^
    od.cuda(m.kernel, out, np.array([6, 3]))
    assert out.tolist() == [5] and compiles() == n + 1


# --- contexts overdub operators -------------------------------------------------------------------------


def copy_kernel(out, x):
    for i in range(x.size):
        out[i] = x[i]


def test_a_context_overdub_of_getitem_applies_to_a_of_i():
    ctx = od.Context("getitem_ctx")

    @ctx.overdub(operator.getitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer):
        return a[i] * 10  # one context down: the real a[i]

    out = np.zeros(3)
    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]), context=ctx)
    assert out.tolist() == [10.0, 20.0, 30.0]
    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]))
    assert out.tolist() == [1.0, 2.0, 3.0]


def test_a_context_overdub_of_setitem_applies_to_a_of_i_equals_v():
    ctx = od.Context("setitem_ctx")

    @ctx.overdub(operator.setitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer, v: od.Float):
        a[i] = v + 0.5

    out = np.zeros(3)
    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]), context=ctx)
    assert out.tolist() == [1.5, 2.5, 3.5]


def test_a_context_overdub_of_getitem_applies_to_constant_indices_and_not_to_tuples():
    ctx = od.Context("static_getitem_ctx")

    @ctx.overdub(operator.getitem)
    def _(a: od.Array, i: od.Integer):
        return -1.0

    def kernel(out, x, t):
        out[0] = x[0]
        out[1] = t[1]  # a heterogeneous tuple: numba's static index, untouched
        out[2] = x.shape[0]

    out = np.zeros(3)
    od.cuda(kernel, out, np.array([5.0, 6.0]), (1, 7.5), context=ctx)
    assert out.tolist() == [-1.0, 7.5, 2.0]


def test_a_context_overdub_of_operator_add_applies_to_a_plus_b():
    ctx = od.Context("add_ctx")

    @ctx.overdub(operator.add)
    def _(a: od.Float, b: od.Float):
        return a - b

    def kernel(out, x):
        out[0] = x[0] + x[1]
        out[1] = 10 + 1  # two constants: numba folds them

    out = np.zeros(2)
    od.cuda(kernel, out, np.array([5.0, 2.0]), context=ctx)
    assert out.tolist() == [3.0, 11.0]


def test_adding_an_operator_overdub_recompiles_the_kernels_compiled_in_that_context():
    ctx = od.Context("late_ctx")
    out = np.zeros(3)
    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]), context=ctx)

    @ctx.overdub(operator.getitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer):
        return 7.0

    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]), context=ctx)
    assert out.tolist() == [7.0, 7.0, 7.0]


# --- dunders --------------------------------------------------------------------------------------------


def test_class_dunders_work_in_kernels_with_the_reflected_fallback(rec):
    rec.run("""
        from overdub import dunders, operators

        class Complex2:
            def __add__(self, other: R):
                return re(self) + re(other)

            def __radd__(self, other: od.Float):
                return other * 100 + re(self)

            def __neg__(self):
                return -im(self)

            def __getitem__(self, i: od.Integer):
                return im(self) * i

        dunders.register(Complex2, R)

        def all_kernel(out, rs):
            out[0] = rs[0] + rs[1]
            out[1] = 1.5 + rs[0]
            out[2] = -rs[0]
            out[3] = rs[1][3]
    """)
    out = np.zeros(4)
    od.cuda(rec.all_kernel, out, records(rec.DTYPE, (1.0, 2.0), (3.0, 4.0)))
    assert out.tolist() == [4.0, 151.0, -2.0, 12.0]


def test_a_comparison_falls_back_to_the_mirrored_dunder_of_the_right_operand(rec):
    rec.run("""
        from overdub import dunders, operators

        class Ordered:
            def __gt__(self, other: od.Float):
                return re(self) > other

        dunders.register(Ordered, R)

        def cmp_kernel(out, rs):
            out[0] = 2.0 < rs[0]         # float has no __lt__ for R: R.__gt__(2.0)
    """)
    out = np.zeros(1)
    od.cuda(rec.cmp_kernel, out, records(rec.DTYPE, (3.0, 0.0)))
    assert out.tolist() == [1.0]


def test_a_left_dunder_whose_annotations_reject_the_right_operand_falls_back_to_radd(rec):
    rec.run("""
        from overdub import dunders, operators

        class Picky:
            def __add__(self, other: od.Integer):
                return 1.0

            def __radd__(self, other):
                return 2.0

        dunders.register(Picky, R)

        def picky_kernel(out, rs):
            out[0] = rs[0] + rs[1]       # R + R: __add__ wants an Integer; R.__radd__ applies
            out[1] = rs[0] + 3
    """)
    out = np.zeros(2)
    od.cuda(rec.picky_kernel, out, records(rec.DTYPE, (0, 0), (0, 0)))
    assert out.tolist() == [2.0, 1.0]


# --- built-in types are untouched -----------------------------------------------------------------------


def idioms(out, x, t, a2):
    i = 0
    while i < x.shape[0]:
        v = x[i] ** 2 + t[0] * t[1] - abs(x[i])
        v += 1.0
        w = -v
        if not (v < 0.5) and i in (1, 2, 3):
            w *= 2
        k = i
        k //= 2
        out[i] = w + a2[i, 0] + x.shape[0] * (k % 3 + (k << 1)) + t[2]
        i += 1


def test_kernels_on_built_in_types_compute_the_same_when_every_operator_has_methods():
    x = np.array([0.25, 1.0, 2.0, 3.0])
    a2 = np.arange(8.0).reshape(4, 2)
    t = (1.5, 2, 7.0)
    before = np.zeros(4)
    od.cuda(idioms, before, x, t, a2)
    dtype = record_dtype()
    R = record_type(dtype)
    for op in (
        operator.add,
        operator.sub,
        operator.mul,
        operator.pow,
        operator.lt,
        operator.mod,
        operator.lshift,
        operator.contains,
        operator.getitem,
        operator.iadd,
        operator.imul,
        operator.ifloordiv,
    ):
        od.method(op, sig=(R, R))(lambda a, b: 0)
    for op in (operator.neg, operator.not_, abs):
        od.method(op, sig=(R,))(lambda a: 0)
    od.method(operator.setitem, sig=(R, R, R))(lambda a, b, c: None)
    after = np.zeros(4)
    n = compiles()
    od.cuda(idioms, after, x, t, a2)
    if settings.REROUTE.value() == "when-extended":
        assert compiles() == n + 1  # the kernel relied on the tables being empty
    assert after.tolist() == before.tolist()


def test_operator_methods_race_with_compiles_on_other_threads(make_module):
    m = make_module(
        """
        import overdub as od

        def kernel(out, x):
            for i in range(x.size):
                out[i] = x[i] + 1.0
    """,
        prefix="race",
    )
    x = np.arange(8.0)
    errors = []

    def launch():
        try:
            for _ in range(5):
                out = np.zeros(8)
                od.cuda(m.kernel, out, x)
                assert out.tolist() == (x + 1).tolist()
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(5):
        R = record_type(record_dtype())
        od.method(operator.add, sig=(R, R))(lambda a, b: 0.0)
    for thread in threads:
        thread.join()
    assert errors == []


def test_dunders_with_defaults_setitem_contains_and_abs(rec):
    rec.run(
        """
        from overdub import dunders

        class More:
            def __pow__(self, other: od.Integer, mod=None):
                return re(self) ** other

            def __setitem__(self, i: od.Integer, v: od.Float):
                if i == 0:
                    self.{re} = v
                else:
                    self.{im} = v

            def __contains__(self, x: od.Float):
                return re(self) <= x <= im(self)

            def __abs__(self):
                return im(self) - re(self)

        dunders.register(More, R)

        def more_kernel(out, rs):
            r = rs[0]
            out[0] = r ** 2
            out[1] = 2.5 in r
            out[2] = abs(r)
            r[1] = 9.0
            out[3] = im(rs[0])
    """.replace("{re}", rec.DTYPE.names[0]).replace("{im}", rec.DTYPE.names[1])
    )
    out = np.zeros(4)
    od.cuda(rec.more_kernel, out, records(rec.DTYPE, (2.0, 3.0)))
    assert out.tolist() == [4.0, 1.0, 1.0, 9.0]


def test_a_method_on_a_numba_cuda_device_function(make_module):
    m = make_module(
        """
        import overdub as od
        from numba import cuda

        @cuda.jit(device=True)
        def scale(x):
            return x * 2

        @od.method(scale)
        def scale_pointee(p: od.Ptr[od.float64]):
            return od.unsafe_load(p, 0) * 3

        def kernel(out, x, p):
            out[0] = scale(x[0])
            out[1] = scale(p)
    """,
        prefix="device_function_method",
    )
    x = np.array([5.0])
    out = np.zeros(2)
    od.cuda(m.kernel, out, x, od.pointer(x))
    assert out.tolist() == [10.0, 15.0]


def test_a_method_added_to_an_operator_pickles_by_reference_in_a_method_error(rec):
    import pickle

    rec.run("""
        @od.method(operator.add)
        def add(a: R, b: od.Float):
            return 0.0
    """)
    with pytest.raises(od.MethodError) as info:
        od.cuda(rec.add_kernel, np.zeros(1), records(rec.DTYPE, (1, 2), (3, 4)))
    again = pickle.loads(pickle.dumps(info.value))
    assert [str(m) for m in again.candidates] == [str(m) for m in info.value.candidates]
    added = [m for m in info.value.candidates if m.func.__module__ == rec.__name__ and m.name == "add"]
    assert [m for m in again.candidates if m is added[-1]]  # by reference: the very method


# --- struct dunders -------------------------------------------------------------------------------------

DUAL = """
import math
import operator
import typing

import overdub as od

T = typing.TypeVar("T")


@od.struct
class Dual(typing.Generic[T]):
    x: T
    dx: T

    def __add__(self, other: "Dual"):
        return Dual(self.x + other.x, self.dx + other.dx)

    def __radd__(self, other: od.Number):
        return Dual(other + self.x, self.dx)

    def __mul__(self, other: "Dual"):
        return Dual(self.x * other.x, self.x * other.dx + self.dx * other.x)

    def __rmul__(self, other: od.Number):
        return Dual(other * self.x, other * self.dx)

    def __pow__(self, n: od.Integer):
        return Dual(self.x ** n, n * self.x ** (n - 1) * self.dx)

    def __neg__(self):
        return Dual(-self.x, -self.dx)

    def __lt__(self, other: "Dual"):
        return self.x < other.x

    def __getitem__(self, i: od.Integer):
        return self.x if i == 0 else self.dx


@od.method(math.sin)
def sin(d: Dual):
    return Dual(math.sin(d.x), math.cos(d.x) * d.dx)


@od.method(operator.add)
def add(d: Dual, c: od.Number):             # one __add__ a class: other operand types are methods
    return Dual(d.x + c, d.dx)


def f(x):
    return 3 * x * x + 2 + x ** 3 + math.sin(x)


def kernel(out, x):
    d = f(Dual(x, 1.0))
    out[0] = d[0]
    out[1] = d[1]
    out[2] = -d < d
    out[3] = f(x)
"""


def test_struct_dunders_differentiate_an_unchanged_function_in_a_kernel(make_module):
    m = make_module(DUAL, prefix="dual_dunders")
    out = np.zeros(4)
    od.cuda(m.kernel, out, 0.5)
    x = 0.5
    assert out.tolist() == pytest.approx(
        [3 * x * x + 2 + x**3 + math.sin(x), 6 * x + 3 * x * x + math.cos(x), 1.0, 3 * x * x + 2 + x**3 + math.sin(x)]
    )


def test_struct_dunders_work_on_the_host_as_python_does(make_module):
    m = make_module(DUAL, prefix="dual_host")
    d = 2 * (m.Dual(2.0, 1.0) * m.Dual(3.0, 0.0)) + m.Dual(1.0, 0.0)
    assert (d.x, d.dx) == (13.0, 6.0)


def test_redefining_a_struct_class_with_other_dunders_recompiles_with_them(make_module):
    m = make_module(DUAL, prefix="dual_redefined")
    out = np.zeros(4)
    od.cuda(m.kernel, out, 0.5)
    m.run(DUAL.replace("return Dual(-self.x, -self.dx)", "return Dual(self.x + 100.0, -self.dx)"))
    od.cuda(m.kernel, out, 0.5)
    assert out[2] == 0.0  # -d is now d + 100: not below d


def test_a_struct_without_the_dunder_gives_a_method_error_naming_the_operator_and_line(make_module):
    m = make_module(
        """
        import overdub as od

        @od.struct
        class Point:
            x: od.float64

            def __add__(self, other: "Point"):
                return Point(self.x + other.x)

        def kernel(out, p):
            q = p * p
            out[0] = q.x
    """,
        prefix="struct_no_dunder",
    )
    with pytest.raises(od.MethodError) as info:
        od.cuda(m.kernel, np.zeros(1), m.Point(1.0))
    message = str(info.value)
    assert "no method matching mul(Point, Point)" in message
    assert f"{m.filename}:{m.line_of('q = p * p')}" in message


def test_a_struct_dunder_annotated_for_the_host_only_is_not_a_device_method(make_module):
    m = make_module(
        """
        import overdub as od

        @od.struct
        class Tag:
            n: od.int64

            def __eq__(self, other: object):
                return isinstance(other, Tag) and other.n == self.n

            __hash__ = None
    """,
        prefix="host_only_dunder",
    )
    assert m.Tag(1) == m.Tag(1) and m.Tag(1) != 1


def test_an_operator_overdub_applies_inside_a_lambda_of_the_kernel():
    ctx = od.Context("lambda_getitem")

    @ctx.overdub(operator.getitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer):
        return a[i] + 100

    def kernel(out, x):
        g = lambda j: x[j] * 2  # noqa: E731 -- a lambda in a kernel is the case under test
        out[0] = g(1)

    out = np.zeros(1)
    od.cuda(kernel, out, np.array([1.0, 2.0]), context=ctx)
    assert out.tolist() == [204.0]


def test_an_operator_overdub_counts_array_reads_in_the_launch_state():
    counting = od.Context("counting_reads", state=od.Array[od.int64, 1])

    @counting.overdub(operator.getitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer):
        counts = od.state()
        counts[0] += 1  # one context down: the real getitem and setitem
        return a[i]

    out, counts = np.zeros(3), np.zeros(1, dtype=np.int64)
    od.cuda(copy_kernel, out, np.array([1.0, 2.0, 3.0]), context=counting, state=counts)
    assert out.tolist() == [1.0, 2.0, 3.0] and counts.tolist() == [3]
