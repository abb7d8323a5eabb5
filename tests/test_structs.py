"""User structs on the CPU target: immutable device value types, parametric ones, user abstract types above
them, arrays of them, named tuples, and what a redefinition of a struct class does.

Kernels are built with the ``make_module`` fixture (source in a real file), like the other kernel tests.
"""

import functools
import re
import threading

import numpy as np
import pytest
from numba.core import types

import overdub as od
from helpers import in_threads, run, unique_name
from overdub.job import CompileError

SHAPES = """
import typing

from numba import cuda

import overdub as od

T = typing.TypeVar("T")


class Shape(od.AbstractType):
    pass


class Polygon(Shape):
    pass


@od.struct
class Circle(Shape):
    r: od.float64


@od.struct
class Square(Polygon):
    side: od.float32
    n: int = 4


@od.struct
class Ring:
    inner: Circle
    outer: Circle
    filled: bool = False


@od.struct
class Dual(typing.Generic[T]):
    x: T
    dx: T


@od.function
def area(c: Circle):
    return 3.0 * c.r * c.r


@od.function
def area(s: Square):
    return s.side * s.side


@od.function
def family(s: Shape):
    return 1


@od.function
def family(p: Polygon):
    return 2


@od.function
def which_dual(d: Dual):
    return 1


@od.function
def which_dual(d: Dual[od.Float]):
    return 2


@od.function
def which_dual(d: Dual[od.float32]):
    return 3


def grown(c):
    return Circle(c.r + 1.0)
"""


@pytest.fixture
def m(make_module):
    return make_module(SHAPES, prefix="structs")


launch = functools.partial(run, n=4, dtype=np.float64, target="cpu")
"""helpers.run as the struct kernels here use it: they write up to four float64s."""


# --- host values ------------------------------------------------------------------------------------------


def test_host_values_are_made_positionally_or_by_keyword_with_defaults(m):
    assert m.Square(2.0) == m.Square(side=2.0, n=4) == m.Square(2, 4)
    assert m.Square(2.0).n == 4 and isinstance(m.Square(2.0).side, np.float32)
    assert repr(m.Ring(m.Circle(1.0), m.Circle(2.0))) == "Ring(inner=Circle(r=1.0), outer=Circle(r=2.0), filled=False)"


def test_host_values_are_immutable(m):
    c = m.Circle(1.0)
    with pytest.raises(AttributeError, match="immutable: cannot set 'r'"):
        c.r = 2.0
    with pytest.raises(AttributeError, match="immutable"):
        del c.r
    assert c.r == 1.0


def test_constructor_rejects_a_wrong_number_of_fields(m):
    with pytest.raises(TypeError, match=r"Circle\(r\): too many positional arguments"):
        m.Circle(1.0, 2.0)
    with pytest.raises(TypeError, match=r"Circle\(r\): missing a required argument: 'r'"):
        m.Circle()
    with pytest.raises(TypeError, match="unexpected keyword argument 'radius'"):
        m.Circle(1.0, radius=1.0)


def test_constructor_rejects_a_value_that_does_not_convert_to_the_field_type(m):
    with pytest.raises(TypeError, match=r"Circle: field 'r' is float64, and 'one' \(str\) does not convert"):
        m.Circle("one")
    with pytest.raises(TypeError, match=r"field 'n' is int64, and 2.5 \(float\) does not convert"):
        m.Square(1.0, 2.5)  # a float never silently truncates into an integer field
    with pytest.raises(TypeError, match="field 'inner' is Circle"):
        m.Ring(m.Square(1.0), m.Circle(1.0))


def test_a_field_of_an_unsupported_type_is_refused_at_the_class_statement():
    with pytest.raises(TypeError, match=r"Bad.a: a struct field cannot be of type str"):

        @od.struct
        class Bad:
            a: str

    with pytest.raises(TypeError, match="cannot be of type Number"):

        @od.struct
        class Vague:
            a: od.Number


def test_a_struct_without_fields_or_deriving_from_a_struct_is_refused(m):
    with pytest.raises(TypeError, match="has no fields"):

        @od.struct
        class Empty:
            pass

    with pytest.raises(TypeError, match="structs are final"):

        @od.struct
        class Sub(m.Circle):
            z: int


def test_a_struct_cannot_define_its_own_constructor_or_setattr():
    with pytest.raises(TypeError, match="defines __init__: a struct's constructor takes its fields' values"):

        @od.struct
        class WithInit:
            a: int

            def __init__(self, a):
                pass

    with pytest.raises(TypeError, match="defines __setattr__"):

        @od.struct
        class Mutable:
            a: int

            def __setattr__(self, name, value):
                pass


def test_struct_defaults_and_two_parameters(make_module):
    m = make_module(
        """
        import typing

        import overdub as od

        A, B = typing.TypeVar("A"), typing.TypeVar("B")


        @od.struct
        class Point:
            x: float
            y: float = 0.0


        @od.struct
        class Pair(typing.Generic[A, B]):
            first: A
            second: B
            origin: Point = Point(1.0)


        def k(out, x, n):
            p = Pair(x, n)
            out[0] = p.first + p.second + p.origin.x
            out[1] = Pair(n, x, Point(x, x)).origin.y
    """,
        prefix="pairs",
    )
    assert type(m.Pair(1.0, 2)) is m.Pair[od.float64, od.int64]
    assert m.Pair(1, 2).origin == m.Point(1.0, 0.0)
    assert launch(m.k, 2.5, 3, n=2) == [6.5, 2.5]


def test_an_abstract_type_has_no_values(m):
    with pytest.raises(TypeError, match="Shape is an abstract type: it has no values"):
        m.Shape()
    assert repr(od.Number) == "Number" and od.AbstractType("X", od.Any).parent is od.Any


# --- the lattice ------------------------------------------------------------------------------------------


def test_structs_sit_below_the_abstract_types_they_derive_from(m):
    assert od.issubtype(m.Circle, m.Shape) and od.issubtype(m.Square, m.Polygon)
    assert od.issubtype(m.Square, m.Shape) and od.issubtype(m.Polygon, m.Shape)
    assert od.issubtype(m.Shape, od.Any) and od.issubtype(m.Circle, od.Any)
    assert not od.issubtype(m.Shape, m.Circle) and not od.issubtype(m.Circle, m.Polygon)
    assert not od.issubtype(m.Shape, od.Number) and not od.issubtype(m.Circle, od.Number)
    assert not od.issubtype(od.float64, m.Shape)


def test_parametric_types_order_from_instantiation_to_pattern(m):
    D = m.Dual
    assert od.issubtype(D[od.float32], D[od.Float]) and od.issubtype(D[od.Float], D)
    assert od.issubtype(D[od.float32], D) and not od.issubtype(D[od.int32], D[od.Float])
    assert not od.issubtype(D, D[od.Float]) and not od.issubtype(D[od.float32], D[od.float64])
    assert D[od.float32] is D[od.float32] and issubclass(D[od.float32], D)


def test_parametric_constructor_infers_its_parameter_from_the_arguments(m):
    assert type(m.Dual(1.0, 2.0)) is m.Dual[od.float64]
    assert type(m.Dual(np.float32(1), np.float32(2))) is m.Dual[od.float32]
    assert type(m.Dual(np.float32(1), 2.0)) is m.Dual[od.float64]  # numbers promote as numpy's do
    assert type(m.Dual(1, 2)) is m.Dual[od.int64]
    assert type(m.Dual[od.float32](1, 2.0)) is m.Dual[od.float32]  # explicit: converts
    with pytest.raises(TypeError, match="the arguments give T the different types Circle, Square"):
        m.Dual(m.Circle(1.0), m.Square(1.0))
    with pytest.raises(TypeError, match="takes 1 type parameter, not 2"):
        m.Dual[od.float32, od.float32]
    with pytest.raises(TypeError, match="not a parametric struct"):
        m.Circle[od.float32]


def test_struct_dtype_is_aligned_as_numba_lays_the_struct_out(m):
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    for cls in (m.Circle, m.Square, m.Ring, m.Dual[od.complex64], m.Dual[od.int8]):
        struct_type = cls.__overdub_type__
        data_type = context.get_data_type(struct_type)
        assert context.get_abi_sizeof(data_type) == cls.dtype.itemsize
        offsets = [data_type.get_element_offset(context.target_data, i) for i in range(len(struct_type.fields))]
        assert offsets == [cls.dtype.fields[name][1] for name, _ in struct_type.fields]


# --- kernels ----------------------------------------------------------------------------------------------


def test_struct_arguments_are_passed_by_value_and_dispatch_on_their_type(m):
    m.run("""
        def k(out, c, s):
            out[0] = area(c)
            out[1] = area(s)
            out[2] = family(c)
            out[3] = family(s)
    """)
    assert launch(m.k, m.Circle(2.0), m.Square(3.0)) == [12.0, 9.0, 1.0, 2.0]
    assert launch(m.k, m.Circle(1.0), m.Square(1.0)) == [3.0, 1.0, 1.0, 2.0]


def test_kernels_make_structs_positionally_by_keyword_and_with_defaults(m):
    m.run("""
        def k(out, x):
            s = Square(x)
            t = Square(n=7, side=x + 1)
            ring = Ring(Circle(x), Circle(2 * x))
            out[0] = s.side + s.n
            out[1] = t.side + t.n
            out[2] = ring.outer.r - ring.inner.r
            out[3] = ring.filled
    """)
    assert launch(m.k, 1.5) == [5.5, 9.5, 1.5, 0.0]


def test_device_methods_return_structs(m):
    m.run("""
        def k(out, c):
            g = grown(grown(c))
            out[0] = g.r
    """)
    assert launch(m.k, m.Circle(1.0), n=1) == [3.0]


def test_nested_struct_arguments_are_unboxed_field_by_field(m):
    m.run("""
        def k(out, ring):
            out[0] = ring.inner.r
            out[1] = ring.outer.r
            out[2] = ring.filled
    """)
    assert launch(m.k, m.Ring(m.Circle(1.0), m.Circle(2.0), True), n=3) == [1.0, 2.0, 1.0]


def test_a_wrong_constructor_call_in_a_kernel_names_the_field_and_the_line(m):
    m.run(
        """
        def k(out, x):
            out[0] = Square(x, 2.5).n
    """,
    )
    with pytest.raises(
        CompileError, match=r"(?s)field 'n' is int64, and a float64 does not convert.*structs_\d+_1\.py"
    ):
        launch(m.k, 1.0)
    m.run("""
        def k2(out, x):
            out[0] = Circle(x, x).r
    """)
    with pytest.raises(CompileError, match=r"Circle\(r\): too many positional arguments"):
        launch(m.k2, 1.0)


def test_kernels_cannot_assign_fields_or_make_abstract_values(m):
    m.run("""
        def k(out, c):
            c.r = 2.0

        def k2(out):
            s = Shape()
    """)
    with pytest.raises(CompileError, match=r"(?s)Circle values are immutable: cannot set 'r'.*structs_\d+_1\.py"):
        launch(m.k, m.Circle(1.0))
    with pytest.raises(CompileError, match="Shape is an abstract type: it has no values"):
        launch(m.k2)


def test_parametric_structs_instantiate_in_kernels_and_dispatch_by_parameter(m):
    m.run("""
        def k(out, x):
            d = Dual(x, 1.0)
            out[0] = d.x + d.dx
            out[1] = which_dual(d)
            out[2] = which_dual(Dual(1, 2))
            out[3] = which_dual(Dual(x, x))
    """)
    assert launch(m.k, np.float32(2.5)) == [3.5, 2.0, 1.0, 3.0]  # float32 and 1.0 promote to float64
    assert launch(m.k, 2) == [3.0, 2.0, 1.0, 1.0]


def test_a_struct_global_is_a_constant_of_its_type(m):
    m.run("""
        UNIT = Circle(1.0)

        def k(out):
            out[0] = area(UNIT)
    """)
    assert launch(m.k, n=1) == [3.0]


# --- arrays of structs ------------------------------------------------------------------------------------

AREAS_THEN_GROW = """
def k(out, ps):
    i = cuda.grid(1)
    c = ps[i]
    out[i] = area(c)
    ps[i] = Circle(c.r + 1)
"""
"""A kernel writing the area of each circle of ``ps`` to ``out``, then storing the circle one larger."""


def test_elements_of_a_struct_array_are_struct_values_loaded_and_stored(m):
    m.run(AREAS_THEN_GROW)
    ps = od.struct_array(m.Circle, 4, target="cpu")
    ps["r"] = [0, 1, 2, 3]
    assert launch(m.k, ps, threads=4) == [0.0, 3.0, 12.0, 27.0]
    assert ps["r"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_numpy_array_of_the_struct_dtype_is_a_struct_array(m):
    m.run("""
        def k(out, ps):
            out[0] = area(ps[1]) + ps[0].n
    """)
    ps = np.zeros(2, dtype=m.Square.dtype)
    ps["side"], ps["n"] = [1.0, 2.0], [4, 4]
    assert launch(m.k, ps, n=1) == [8.0]


def test_a_record_array_of_equal_fields_but_no_struct_is_not_taken_for_one(m):
    m.run("""
        def k(out, ps):
            out[0] = area(ps[0])
    """)
    circles = od.struct_array(m.Circle, 1, target="cpu")
    circles["r"] = 1.0
    assert launch(m.k, circles, n=1) == [3.0]
    plain = np.ones(1, dtype=np.dtype([("r", "f8")], align=True))
    assert plain.dtype == circles.dtype  # numpy cannot tell them apart: the guard must
    with pytest.raises(od.MethodError):
        launch(m.k, plain, n=1)


def test_two_structs_of_identical_fields_are_different_types_in_arrays(m):
    m.run("""
        @od.struct
        class Disk:
            r: od.float64

        @od.function
        def area(d: Disk):
            return -1.0

        def k(out, ps):
            out[0] = area(ps[0])
    """)
    circles, disks = od.struct_array(m.Circle, 1, target="cpu"), od.struct_array(m.Disk, 1, target="cpu")
    circles["r"] = disks["r"] = 2.0
    assert circles.dtype == disks.dtype
    assert launch(m.k, circles, n=1) == [12.0]
    assert launch(m.k, disks, n=1) == [-1.0]
    assert launch(m.k, circles, n=1) == [12.0]


def test_struct_array_takes_only_concrete_struct_classes(m):
    with pytest.raises(TypeError, match="parametric one: instantiate it"):
        od.struct_array(m.Dual, 3, target="cpu")
    with pytest.raises(TypeError, match=r"concrete @od.struct class"):
        od.struct_array(m.Shape, 3, target="cpu")
    assert od.struct_array(m.Dual[od.float32], (2, 3), target="cpu").dtype == m.Dual[od.float32].dtype


def test_array_annotations_dispatch_on_the_struct_element_type(m):
    m.run("""
        @od.function
        def count(a: od.Array[Shape, 1]):
            return a.shape[0]

        @od.function
        def count(a: od.Array[od.Any, 1]):
            return -1

        def k(out, ps, xs):
            out[0] = count(ps)
            out[1] = count(xs)
    """)
    assert launch(m.k, od.struct_array(m.Circle, 3, target="cpu"), np.zeros(2), n=2) == [3.0, -1.0]


# --- dispatch, ambiguity, invalidation --------------------------------------------------------------------


def test_methods_on_abstract_types_are_ambiguous_like_built_in_ones(m):
    m.run("""
        @od.function
        def meet(a: Shape, b: Circle):
            return 1

        @od.function
        def meet(a: Circle, b: Shape):
            return 2
    """)
    assert m.meet(m.Circle(1.0), m.Square(1.0)) == 2
    with pytest.raises(od.AmbiguityError):
        m.meet(m.Circle(1.0), m.Circle(1.0))


def test_a_more_specific_method_for_a_struct_invalidates_kernels_that_used_the_abstract_one(m):
    m.run("""
        def k(out, c):
            out[0] = family(c)
    """)
    assert launch(m.k, m.Circle(1.0), n=1) == [1.0]
    m.run("""
        @od.function
        def family(c: Circle):
            return 3
    """)
    assert launch(m.k, m.Circle(1.0), n=1) == [3.0]
    assert any("family(c: Circle)" in entry.cause for entry in od.invalidation_log())


def test_host_calls_of_generic_functions_dispatch_on_struct_values(m):
    assert m.area(m.Circle(1.0)) == 3.0 and m.family(m.Square(1.0)) == 2
    assert m.which_dual(m.Dual(1.0, 1.0)) == 2 and m.which_dual(m.Dual[od.float32](1, 1)) == 3
    assert od.which(m.family, m.Circle).sig == (m.Shape,)


# --- named tuples -----------------------------------------------------------------------------------------

NAMED = """
import typing

import overdub as od


class Point(typing.NamedTuple):
    x: float
    y: float


@od.function
def norm1(p: Point):
    return abs(p.x) + abs(p.y)


def k(out, p):
    out[0] = norm1(p)
    out[1] = norm1(Point(p.y, 10.0))
"""


def test_named_tuples_annotate_methods_and_pass_as_arguments(make_module):
    m = make_module(NAMED, prefix="named")
    assert launch(m.k, m.Point(1.0, -2.0), n=2) == [3.0, 12.0]
    assert launch(m.k, m.Point(1, 2), n=2) == [3.0, 12.0]  # int fields: another type, compiled anew
    assert m.norm1(m.Point(3.0, 4.0)) == 7.0
    assert od.issubtype(types.NamedUniTuple(od.float64, 2, m.Point), m.Point)


# --- redefinition -----------------------------------------------------------------------------------------


def test_redefining_a_struct_recompiles_kernels_that_read_it_and_refuses_old_values(m):
    m.run("""
        def k(out, c):
            out[0] = c.r
    """)
    old = m.Circle(2.0)
    assert launch(m.k, old, n=1) == [2.0]
    m.run("""
        @od.struct
        class Circle(Shape):
            r: od.float32
            weight: od.float32 = 1.0
    """)
    assert launch(m.k, m.Circle(5.0), n=1) == [5.0]
    with pytest.raises(TypeError, match=r"Circle .*redefined at structs_\d+_2\.py:\d+; make it again"):
        launch(m.k, old, n=1)
    with pytest.raises(TypeError, match="redefined"):
        m.Circle.__overdub_spec__ and type(old)(1.0)
    assert any("struct Circle redefined" in entry.cause for entry in od.invalidation_log())


def test_a_cached_launch_of_an_old_struct_value_is_refused_after_redefinition(m):
    m.run("""
        def k(out, c):
            out[0] = 1.0
    """)
    old = m.Circle(2.0)
    assert launch(m.k, old, n=1) == [1.0]
    assert launch(m.k, old, n=1) == [1.0]  # the cached launch function
    m.run(
        SHAPES.split("@od.struct\nclass Square")[0].split("class Shape")[0]
        + """
@od.struct
class Circle:
    r: od.float64
"""
    )
    with pytest.raises(TypeError, match="redefined"):
        launch(m.k, old, n=1)


def test_a_class_statement_run_again_unchanged_keeps_the_class_its_values_and_what_compiled(m):
    m.run("""
        def k(out, c):
            out[0] = c.r * 2
    """)
    value = m.Circle(1.5)
    assert launch(m.k, value, n=1) == [3.0]
    compiled = od.stats()["compiles"]
    first = m.Circle
    m.run("""
        @od.struct
        class Circle(Shape):
            r: od.float64
    """)
    assert m.Circle is first  # the same class: its values stay valid, nothing recompiles
    assert launch(m.k, value, n=1) == [3.0] and od.stats()["compiles"] == compiled
    m.run("""
        @od.struct
        class Circle(Shape):
            r: od.float64

            def area(self):
                return self.r
    """)
    assert m.Circle is not first  # a member added: a redefinition, which supersedes the class
    with pytest.raises(TypeError, match="redefined"):
        launch(m.k, value, n=1)


def test_arrays_of_a_redefined_struct_are_refused(m):
    m.run("""
        def k(out, ps):
            out[0] = ps[0].r
    """)
    ps = od.struct_array(m.Circle, 1, target="cpu")
    assert launch(m.k, ps, n=1) == [0.0]
    m.run("""
        @od.struct
        class Circle(Shape):
            r: od.float64 = 0.0  # changed: a default (run again unchanged, it would be no redefinition)
    """)
    with pytest.raises(TypeError, match=r"cannot pass an array of Circle: .*redefined"):
        launch(m.k, ps, n=1)
    assert launch(m.k, od.struct_array(m.Circle, 1, target="cpu"), n=1) == [0.0]


def test_structs_made_in_a_function_are_separate_classes_and_retire_nothing():
    def make():
        @od.struct
        class Local:
            a: int

        return Local

    first, second = make(), make()
    assert first is not second and first(1).a == 1 and second(2).a == 2


def test_two_threads_instantiating_a_parametric_struct_get_one_class(m):
    made, barrier = [], threading.Barrier(8)

    def instantiate():
        barrier.wait()
        made.append(m.Dual[od.int16])

    assert in_threads(lambda _: instantiate(), range(8)) == []
    assert len(made) == 8 and all(cls is made[0] for cls in made)


# --- the CUDA target: code generation without a GPU, and launches on one ----------------------------------


def _params(ptx: str) -> list[str]:
    return [line.split()[0] for line in ptx.splitlines() if line.strip().startswith("ld.param")]


def test_ptx_takes_a_struct_argument_as_one_parameter_per_field(m):
    m.run("""
        def k(out, c, s):
            out[0] = area(c) + area(s) + s.n
    """)
    ptx = od.code_ptx(m.k, types.float64[::1], m.Circle.__overdub_type__, m.Square.__overdub_type__)
    assert _params(ptx) == ["ld.param.u64", "ld.param.f64", "ld.param.f32", "ld.param.u64"]
    assert ".entry" in ptx


def test_ptx_loads_and_stores_struct_array_elements_at_their_field_offsets(m):
    m.run("""
        def k(rings, out):
            r = rings[1]
            out[0] = r.outer.r
            rings[0] = Ring(Circle(out[1]), r.inner, True)
    """)
    ptx = od.code_ptx(m.k, types.Array(m.Ring.__overdub_type__, 1, "C"), types.float64[::1])
    assert m.Ring.dtype.itemsize == 24 and m.Ring.dtype.fields["outer"][1] == 8
    assert re.search(r"ld\.global\.f64\s+%fd\d+, \[%rd\d+\+32\]", ptx)  # rings[1].outer.r: 24 + 8
    assert re.search(r"st\.global\.u8\s+\[%rd\d+\+16\]", ptx)  # rings[0].filled


def test_ptx_dispatches_on_the_parameter_of_a_parametric_struct(m, cuda_compiler):
    m.run("""
        def k(out, x):
            out[0] = which_dual(Dual(x, x)) * 1000 + 7
    """)
    for argtype, method in ((od.float32, 3), (od.float64, 2), (od.int32, 1)):
        ptx = od.code_ptx(m.k, types.int64[::1], argtype)
        assert re.search(rf"mov\.u64\s+%rd\d+, {method}007;", ptx), argtype


def test_cuda_parameter_slots_of_struct_and_named_tuple_values(m, make_module):
    from overdub import arguments
    from overdub.targets.cuda import abi

    slots = abi.value_slots(m.Ring.__overdub_type__)
    assert abi.slot_format(slots) == "<dd?7x"
    assert abi.slot_values(slots, "v", {}) == ["v.inner.r", "v.outer.r", "v.filled"]
    n = make_module(NAMED, prefix="named_slots")
    point = n.Point(1.0, 2.0)
    kind = arguments.kind_of(point)
    slots = abi.kind_slots(kind, kind.signature(point), kind.typeof(point))
    assert (abi.slot_format(slots), abi.slot_values(slots, "v", {})) == ("<dd", ["v[0]", "v[1]"])
    assert kind.typeof(n.Point(1, 2.0)) == types.NamedTuple((od.int64, od.float64), n.Point)


def test_a_struct_of_a_redefined_class_is_refused_on_the_cuda_target_too(m):
    old = m.Circle(1.0)
    m.run("""
        @od.struct
        class Circle(Shape):
            r: od.float64 = 0.0
    """)
    from overdub.targets import get_target

    with pytest.raises(TypeError, match="redefined"):
        get_target("cuda").typeof(old)


launch_gpu = functools.partial(launch, target="cuda")


@pytest.mark.gpu
def test_gpu_struct_arguments_by_value_and_dispatch(m, cupy):
    m.run("""
        def k(out, c, s, ring):
            out[0] = area(c)
            out[1] = area(s) + s.n
            out[2] = ring.outer.r + ring.filled
            out[3] = family(s)
    """)
    ring = m.Ring(m.Circle(1.0), m.Circle(2.0), True)
    assert launch_gpu(m.k, m.Circle(2.0), m.Square(3.0), ring) == [12.0, 13.0, 3.0, 2.0]
    assert launch_gpu(m.k, m.Circle(1.0), m.Square(1.0, 7), ring) == [3.0, 8.0, 3.0, 2.0]


@pytest.mark.gpu
def test_gpu_struct_array_elements_read_and_written(m, cupy):
    m.run(AREAS_THEN_GROW)
    ps = od.struct_array(m.Circle, 4, target="cuda")
    host = np.zeros(4, dtype=m.Circle.dtype)
    host["r"] = [0, 1, 2, 3]
    ps.set(host)
    assert launch_gpu(m.k, ps, threads=4) == [0.0, 3.0, 12.0, 27.0]
    assert ps.get()["r"].tolist() == [1.0, 2.0, 3.0, 4.0]
    plain = cupy.asarray(np.zeros(4, dtype=np.dtype([("r", "f8")], align=True)))
    with pytest.raises(od.MethodError):  # same fields, no struct: not taken for Circle
        launch_gpu(m.k, plain, threads=4)


@pytest.mark.gpu
def test_gpu_parametric_struct_dispatch_and_construction(m, cupy):
    m.run("""
        def k(out, x, d):
            e = Dual(x, 1.0)
            out[0] = e.x + e.dx
            out[1] = which_dual(e)
            out[2] = which_dual(d)
            out[3] = d.x * d.dx
    """)
    assert launch_gpu(m.k, np.float32(2.5), m.Dual[od.float32](2, 3)) == [3.5, 2.0, 3.0, 6.0]
    assert launch_gpu(m.k, 2, m.Dual(2, 4)) == [3.0, 2.0, 1.0, 8.0]


@pytest.mark.gpu
def test_gpu_named_tuple_argument(make_module, cupy):
    n = make_module(NAMED, prefix="named_gpu")
    assert launch_gpu(n.k, n.Point(1.0, -2.0), n=2) == [3.0, 12.0]


def test_a_quoted_annotation_under_postponed_annotations_names_its_class(tmp_path, monkeypatch):
    """``from __future__ import annotations`` stores ``o: "S"`` as the string ``"'S'"``: evaluated once it is
    still a string, which must name the class (as typing.get_type_hints reads it), not leave the dunder
    without a method for (S, S). (An imported module: postponed field annotations are read in it.)"""
    import importlib
    import textwrap

    name = unique_name("postponed")
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent("""
        from __future__ import annotations
        import overdub as od

        @od.struct
        class S:
            a: od.int64

            def __add__(self, o: "S"):
                return S(self.a + o.a)

        def kernel(out, s):
            out[0] = (s + s).a
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    m = importlib.import_module(name)
    out = np.zeros(1, np.int64)
    od.cuda(m.kernel, out, m.S(3), target="cpu")
    assert out[0] == 6
