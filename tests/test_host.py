"""od.overdub(ctx, f, *args): Cassette's overdub on the host -- compiled by the CPU target, in a context, with
edges (issue 24 item 1)."""

import numpy as np
import pytest

import overdub as od


def test_a_host_call_runs_compiled_in_a_context_and_returns_its_value(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def g(x: od.Float):
            return x + 1.0

        tripling = od.Context("tripling")

        @tripling.overdub(g)
        def _(x: od.Float):
            return x * 3.0

        def f(x):
            return g(x) + 0.5

        def total(a):
            s = 0.0
            for i in range(a.size):
                s += g(a[i])
            return s
    """)
    assert od.overdub(None, m.f, 2.0) == 3.5
    assert od.overdub(m.tripling, m.f, 2.0) == 6.5
    assert od.overdub(m.tripling, m.g, 2.0) == 6.0  # a generic function itself
    assert od.overdub(None, m.total, np.arange(3.0)) == 6.0
    compiles = od.stats()["compiles"]
    assert od.overdub(None, m.f, 4.0) == 5.5 and od.stats()["compiles"] == compiles  # compiled once


def test_a_redefinition_makes_the_next_host_call_compile_again(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def g(x: od.Float):
            return x + 1.0

        def f(x):
            return g(x) * 2.0
    """)
    assert od.overdub(None, m.f, 1.0) == 4.0
    m.run("@od.function\ndef g(x: od.Float):\n    return x + 10.0\n")
    compiles = od.stats()["compiles"]
    assert od.overdub(None, m.f, 1.0) == 22.0 and od.stats()["compiles"] == compiles + 1


def test_an_argument_compiled_code_cannot_take_is_a_clear_error(make_module):
    m = make_module("def f(x):\n    return x\n")
    with pytest.raises(TypeError, match=r"od.overdub\(ctx, f, ...\): argument 0 \(object"):
        od.overdub(None, m.f, object())


def test_a_host_call_in_a_context_with_state_passes_it_to_the_hooks(make_module):
    m = make_module("""
        import overdub as od

        counting = od.Context("counting", state=od.Array[od.int64, 1])

        @od.function
        def g(x: od.Float):
            return x + 1.0

        @counting.prehook(g)
        def _(x):
            s = od.state()
            s[0] += 1

        def f(x):
            return g(g(x))
    """)
    counts = np.zeros(1, dtype=np.int64)
    assert od.overdub(m.counting, m.f, 1.0, state=counts) == 3.0 and counts[0] == 2
    assert od.overdub(m.counting, m.f, 1.0, state=counts) == 3.0 and counts[0] == 4
    with pytest.raises(TypeError, match="declares state of type"):
        od.overdub(m.counting, m.f, 1.0)
    with pytest.raises(TypeError, match="declares no state"):
        od.overdub(None, m.f, 1.0, state=counts)
