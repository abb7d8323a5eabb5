"""Contexts on the CPU target: overdubs of every kind of callee, lookup order, inheritance, calls one
context down, libraries extending ``od.CPU``, and recompilation when an overdub appears after a compile.

Overdubs on ``od.CPU`` are process-wide, so the tests that add them do so only for callees of their own
(a fresh generic function, or a function of a fresh module).
"""

import math
import pickle
import sys

import numpy as np
import pytest

import overdub as od
from helpers import CALLS_HELPER, compiles, run, unique_name


def generic(name, body, sig=(od.Integer,)):
    f = od.GenericFunction(name)
    f.define(body, sig=sig)
    return f


@pytest.fixture
def g():
    """A fresh generic function g(x: Integer) = x + 1, and a kernel writing g(10)."""
    return generic("g", lambda x: x + 1)


def overdub_returning(context, f, value, on=od.Integer):
    """Add to ``context`` the overdub ``f(x: on) = value``."""

    @context.overdub(f)
    def _(x: on):
        return value


SINE = "import math\n\n\ndef kernel(out, x):\n    out[0] = math.sin(x)\n"
"""Module source of a kernel writing math.sin(x) to out[0]."""


def kernel_calling(f):
    def kernel(out):
        out[0] = f(10)

    return kernel


# --- an overdub replaces a callee in its context only ---------------------------------------------------


def test_context_overdub_of_a_generic_function_is_used_in_that_context(g):
    ctx = od.Context("ctx")
    overdub_returning(ctx, g, 1000)
    assert run(kernel_calling(g), context=ctx) == [1000]


def test_context_overdub_does_not_affect_launches_without_the_context(g):
    ctx = od.Context("ctx")
    overdub_returning(ctx, g, 1000)
    kernel = kernel_calling(g)
    run(kernel, context=ctx)
    assert run(kernel) == [11]


def test_overdub_that_does_not_apply_falls_through_to_the_callee(g):
    ctx = od.Context("ctx")
    overdub_returning(ctx, g, 1000, on=od.Float)
    assert run(kernel_calling(g), context=ctx) == [11]


def test_context_overdub_of_a_plain_function(make_module):
    m = make_module(CALLS_HELPER)
    ctx = od.Context("ctx")
    overdub_returning(ctx, m.helper, 7)
    assert run(m.kernel, context=ctx) == [7]


def test_overdub_of_a_plain_function_survives_its_redefinition(make_module):
    m = make_module(CALLS_HELPER)
    ctx = od.Context("ctx")
    overdub_returning(ctx, m.helper, 7)
    m.run("""
        def helper(x):
            return x + 2
    """)
    assert run(m.kernel, context=ctx) == [7]
    assert run(m.kernel) == [12]


def test_context_overdub_of_a_module_function(make_module):
    m = make_module(SINE)
    ctx = od.Context("ctx")
    overdub_returning(ctx, math.sin, 42.0, on=od.Float)
    assert run(m.kernel, 0.5, dtype=np.float64, context=ctx) == [42.0]
    assert run(m.kernel, 0.5, dtype=np.float64) == [pytest.approx(math.sin(0.5))]


def test_context_overdub_of_a_function_imported_by_name(make_module):
    m = make_module("""
        from math import cos

        def kernel(out, x):
            out[0] = cos(x)
    """)
    ctx = od.Context("ctx")
    overdub_returning(ctx, math.cos, 42.0, on=od.Float)
    assert run(m.kernel, 0.5, dtype=np.float64, context=ctx) == [42.0]


def test_context_overdub_of_print(make_module, capfd):
    m = make_module("""
        def kernel(x):
            print(x)
    """)
    ctx = od.Context("ctx")

    @ctx.overdub(print)
    def _(x: od.Integer):
        print(x * 2)

    capfd.readouterr()
    od.cuda(m.kernel, 21, context=ctx)
    od.cuda(m.kernel, 21)
    assert capfd.readouterr().out == "42\n21\n"


def test_context_overdub_of_an_intrinsic(make_module):
    m = make_module("""
        import overdub as od

        def kernel(p):
            od.unsafe_store(p, 5)
    """)
    ctx = od.Context("ctx")

    @ctx.overdub(od.unsafe_store)
    def _(p: od.Ptr[od.int64], v: od.Integer):
        od.unsafe_store(p, v + 1000)

    a = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, od.pointer(a), context=ctx)
    assert a.tolist() == [1005]


def test_overdub_dispatches_on_argument_types(make_module):
    m = make_module("""
        def helper(x):
            return 0

        def kernel(out, a, b):
            out[0] = helper(a)
            out[1] = helper(b)
    """)
    ctx = od.Context("ctx")
    overdub_returning(ctx, m.helper, 1)
    overdub_returning(ctx, m.helper, 2, on=od.Float)
    assert run(m.kernel, 3, 3.0, n=2, context=ctx) == [1, 2]


# --- calls inside an overdub run one context down -------------------------------------------------------


def test_calling_a_generic_function_inside_its_overdub_reaches_the_function(g):
    ctx = od.Context("ctx")

    @ctx.overdub(g)
    def _(x: od.Integer):
        return g(x) * 100

    assert run(kernel_calling(g), context=ctx) == [1100]


def test_calling_a_module_function_inside_its_overdub_reaches_the_real_one(make_module):
    m = make_module(SINE)
    ctx = od.Context("ctx")

    @ctx.overdub(math.sin)
    def _(x: od.Float):
        return math.sin(x) + 100.0

    assert run(m.kernel, 0.5, dtype=np.float64, context=ctx) == [pytest.approx(math.sin(0.5) + 100.0)]


def test_calls_of_other_callees_inside_an_overdub_also_skip_its_context(g):
    h = generic("h", lambda x: 2)
    ctx = od.Context("ctx")
    overdub_returning(ctx, h, 1000)

    @ctx.overdub(g)
    def _(x: od.Integer):
        return h(x)

    def kernel(out):
        out[0] = g(10)
        out[1] = h(10)

    assert run(kernel, n=2, context=ctx) == [2, 1000]


def test_calling_f_inside_a_user_overdub_reaches_the_od_cpu_overdub_then_f(g):
    ctx = od.Context("ctx")

    @od.CPU.overdub(g)
    def _(x: od.Integer):
        return g(x) * 10

    @ctx.overdub(g)
    def _(x: od.Integer):
        return g(x) + 5

    kernel = kernel_calling(g)
    assert run(kernel, context=ctx) == [(11 * 10) + 5]
    assert run(kernel) == [110]


def test_calling_f_inside_a_child_overdub_reaches_the_parent_overdub(g):
    parent = od.Context("parent")
    child = od.Context("child", parent=parent)

    @parent.overdub(g)
    def _(x: od.Integer):
        return g(x) * 10

    @child.overdub(g)
    def _(x: od.Integer):
        return g(x) + 5

    assert run(kernel_calling(g), context=child) == [115]


# --- inheritance ----------------------------------------------------------------------------------------


def test_child_context_uses_its_parents_overdub(g):
    parent = od.Context("parent")
    child = od.Context("child", parent=parent)
    overdub_returning(parent, g, 1000)
    assert run(kernel_calling(g), context=child) == [1000]


def test_child_overdub_overrides_its_parents(g):
    parent = od.Context("parent")
    child = od.Context("child", parent=parent)
    overdub_returning(parent, g, 1000)
    overdub_returning(child, g, 2000)
    kernel = kernel_calling(g)
    assert run(kernel, context=child) == [2000]
    assert run(kernel, context=parent) == [1000]


def test_user_context_overdub_overrides_od_cpus(g):
    ctx = od.Context("ctx")
    overdub_returning(od.CPU, g, 1000)
    overdub_returning(ctx, g, 2000)
    kernel = kernel_calling(g)
    assert run(kernel, context=ctx) == [2000]
    assert run(kernel) == [1000]


def test_a_more_specific_parent_overdub_loses_to_any_applicable_child_overdub(g):
    parent = od.Context("parent")
    child = od.Context("child", parent=parent)
    overdub_returning(parent, g, 1000, on=od.int64)
    overdub_returning(child, g, 2000, on=od.Any)
    assert run(kernel_calling(g), context=child) == [2000]


# --- overdubs added after a compile ---------------------------------------------------------------------


@pytest.mark.parametrize("added_to", ["the launch's context", "its parent", "od.CPU"])
def test_an_overdub_added_after_compilation_reaches_the_next_launch(g, added_to):
    """Added to the context the kernel launches in, to that context's parent, or to od.CPU (under every launch,
    one without a context too): the next launch recompiles and calls it."""
    parent = od.Context("parent")
    launched_in = {"the launch's context": parent, "its parent": od.Context("child", parent=parent)}.get(added_to)
    kernel = kernel_calling(g)
    assert run(kernel, context=launched_in) == [11]
    overdub_returning(od.CPU if added_to == "od.CPU" else parent, g, 1000)
    assert run(kernel, context=launched_in) == [1000]


def test_overdub_of_a_plain_function_added_after_compilation_triggers_a_recompile(make_module):
    m = make_module(CALLS_HELPER)
    ctx = od.Context("ctx")
    assert run(m.kernel, context=ctx) == [11]
    overdub_returning(ctx, m.helper, 7)
    assert run(m.kernel, context=ctx) == [7]


def test_redefining_an_overdub_is_used_by_the_next_launch(g):
    ctx = od.Context("ctx")
    overdub_returning(ctx, g, 1000)
    kernel = kernel_calling(g)
    assert run(kernel, context=ctx) == [1000]
    overdub_returning(ctx, g, 2000)
    assert run(kernel, context=ctx) == [2000]


def test_overdub_in_another_context_does_not_recompile(g):
    kernel = kernel_calling(g)
    run(kernel)
    before = compiles()
    other = od.Context("other")
    overdub_returning(other, g, 1000)
    assert run(kernel) == [11]
    assert compiles() == before


def test_overdub_of_a_callee_the_kernel_does_not_call_does_not_recompile(g):
    ctx = od.Context("ctx")
    unrelated = generic("unrelated", lambda x: 0)
    kernel = kernel_calling(g)
    run(kernel, context=ctx)
    before = compiles()
    overdub_returning(ctx, unrelated, 1000)
    assert run(kernel, context=ctx) == [11]
    assert compiles() == before


def test_a_kernel_is_compiled_once_per_context(g):
    ctx = od.Context("ctx")
    kernel = kernel_calling(g)
    run(kernel)
    run(kernel, context=ctx)
    before = compiles()
    run(kernel)
    run(kernel, context=ctx)
    assert compiles() == before


def test_explain_lists_the_context_lookup(g):
    ctx = od.Context("explained")
    overdub_returning(ctx, g, 1000)
    kernel = kernel_calling(g)
    out = np.zeros(1, dtype=np.int64)
    od.cuda(kernel, out, context=ctx)
    edges = od.explain(kernel, out, context=ctx)
    assert any(e.startswith("explained.overdub(g)(int64) -> explained.overdub(g)(x: Integer)") for e in edges), edges
    assert od.explain(kernel, out) == []


# --- libraries extending od.CPU -------------------------------------------------------------------------


def test_library_overdub_on_od_cpu_is_used_without_a_context():
    f = generic("library_extended", lambda x: 1)
    overdub_returning(od.CPU, f, 2)
    assert run(kernel_calling(f)) == [2]


def test_od_cpu_overdub_is_used_inside_user_contexts():
    f = generic("library_extended", lambda x: 1)
    overdub_returning(od.CPU, f, 2)
    assert run(kernel_calling(f), context=od.Context("unrelated")) == [2]


def test_when_imported_registers_a_library_overdub_once_the_library_is_imported(tmp_path, monkeypatch, make_module):
    name = unique_name("odlib")
    (tmp_path / f"{name}.py").write_text("def scale(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooked = []

    @od.when_imported(name)
    def register(library):
        hooked.append(library)

        @od.CPU.overdub(library.scale)
        def _(x: od.Integer):
            return x * 3

    assert hooked == []
    try:
        library = __import__(name)
        assert hooked == [library]
        m = make_module(f"""
            import {name}

            def kernel(out):
                out[0] = {name}.scale(5)
        """)
        assert run(m.kernel) == [15]
    finally:
        if hooked:  # od.CPU outlives the test: its overdub of a module that is gone would travel with others'
            od.CPU.table(hooked[0].scale).remove((od.Integer,), "test cleanup")
        sys.modules.pop(name, None)


def test_when_imported_runs_the_hook_now_for_an_imported_module():
    hooked = []
    od.when_imported("math")(hooked.append)
    assert hooked == [math]


def test_a_context_can_overdub_the_kernel_idiom_on_the_cpu_and_in_ptx(make_module):
    from numba import cuda
    from numba.core import types

    m = make_module("""
        from numba import cuda

        def kernel(out):
            out[cuda.grid(1)] = 7
    """)
    shifted = od.Context(unique_name("shifted"))

    @shifted.overdub(cuda.grid)
    def _(n: od.Integer):
        return cuda.grid(1) + 1  # one context down: the target's own cuda.grid

    out = np.zeros(4, dtype=np.int64)
    od.cuda(m.kernel, out, threads=3, context=shifted)
    assert out.tolist() == [0, 7, 7, 7]
    assert od.code_ptx(m.kernel, types.int64[:], context=shifted) != od.code_ptx(m.kernel, types.int64[:])


def test_one_registration_extends_every_target(make_module):
    """od.ALL: a library's overdub for every target in one call (issue 24 item 4)."""
    m = make_module(
        """
        import overdub as od

        @od.function
        def g(x: od.Float):
            return x + 1.0

        def kernel(out):
            out[0] = g(1.0)
    """
    )

    @od.ALL.overdub(m.g)
    def _(x: od.Float):
        return x * 100.0

    try:
        out = np.zeros(1)
        od.cuda(m.kernel, out, target="cpu")
        assert out[0] == 100.0
        assert len(od.CPU.table(m.g).methods) == len(od.CUDA.table(m.g).methods) == 1
        assert "od.CPU and od.CUDA" in repr(od.ALL) and pickle.loads(pickle.dumps(od.ALL)) is od.ALL
    finally:
        for ctx in (od.CPU, od.CUDA):
            ctx.table(m.g).remove((od.Float,), "test cleanup")


# --- stacks: several contexts in one launch ----------------------------------------------------------------


def test_two_contexts_stack_in_one_launch_the_first_delegating_to_the_second(make_module):
    m = make_module(
        """
        import overdub as od

        @od.function
        def g(x: od.Float):
            return x + 1.0

        @od.function
        def h(x: od.Float):
            return x

        tens = od.Context("tens")
        hundreds = od.Context("hundreds")

        @tens.overdub(g)
        def _(x: od.Float):
            return g(x) * 10.0  # one level down the stack: hundreds' overdub, then g itself

        @hundreds.overdub(g)
        def _(x: od.Float):
            return g(x) + 100.0

        @hundreds.overdub(h)
        def _(x: od.Float):
            return x - 1.0

        def kernel(out):
            out[0] = g(1.0)
            out[1] = h(5.0)
    """
    )
    out = np.zeros(2)
    od.cuda(m.kernel, out, target="cpu", context=(m.tens, m.hundreds))
    assert out.tolist() == [1020.0, 4.0]
    od.cuda(m.kernel, out, target="cpu", context=(m.hundreds, m.tens))
    assert out.tolist() == [120.0, 4.0]  # the first listed wins; tens' overdub of g is reached one level down
    od.cuda(m.kernel, out, target="cpu", context=m.tens)
    assert out.tolist() == [20.0, 5.0]
    compiles = od.stats()["compiles"]
    od.cuda(m.kernel, out, target="cpu", context=(m.tens, m.hundreds))
    assert out.tolist() == [1020.0, 4.0] and od.stats()["compiles"] == compiles  # cached per stack
    m.run("@hundreds.overdub(g)\ndef _(x: od.Float):\n    return g(x) + 200.0\n")
    od.cuda(m.kernel, out, target="cpu", context=(m.tens, m.hundreds))
    assert out.tolist() == [2020.0, 4.0]  # invalidated as a single context's code is
    assert od.overdub((m.tens, m.hundreds), m.g, 1.0) == 2020.0


def test_a_stack_of_two_contexts_with_state_is_refused_by_name():
    a = od.Context("with_a", state=od.Array[od.int64, 1])
    b = od.Context("with_b", state=od.Array[od.int64, 1])
    with pytest.raises(TypeError, match="both declare device state"):
        od.cuda(lambda out: None, np.zeros(1), target="cpu", context=(a, b))
