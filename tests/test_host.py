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
