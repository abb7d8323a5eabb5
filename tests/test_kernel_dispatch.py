"""Multiple dispatch inside kernels (overdub/registry.py): a call reaches the most specific method; no
method is a MethodError and several are an AmbiguityError, raised at launch and naming the call site's real
``file.py:LINE`` (the whole call path from the kernel) and the candidate methods; generic functions are
callable on the host; default arguments.
"""

import pytest

import overdub as od
from helpers import TWO_ARGS, run


@pytest.mark.parametrize("x, y, expected", [(1, 2.0, 1), (1.0, 2, 2), (1.0, 2.0, 3)])
def test_two_argument_call_reaches_the_most_specific_method(make_module, x, y, expected):
    m = make_module(TWO_ARGS)
    assert run(m.kernel, x, y) == [expected]


def ambiguous_launch(make_module):
    """The module of TWO_ARGS and the message of the AmbiguityError its kernel raises on two integers."""
    m = make_module(TWO_ARGS)
    with pytest.raises(od.AmbiguityError) as info:
        run(m.kernel, 1, 2)
    return m, str(info.value)


def test_ambiguous_call_raises_at_launch_naming_the_kernel_line(make_module):
    m, message = ambiguous_launch(make_module)
    assert "h(int64, int64) is ambiguous" in message
    assert f"called at {m.filename}:{m.line_of('out[0] = h(x, y)')}" in message


def test_ambiguous_call_lists_the_competing_methods(make_module):
    _, message = ambiguous_launch(make_module)
    assert "h(x: Integer, y: Number)" in message
    assert "h(x: Number, y: Integer)" in message
    assert "h(x: Float, y: Float)" not in message


def test_method_error_names_the_function_argument_types_and_candidates(make_module):
    m = make_module(TWO_ARGS)
    with pytest.raises(od.MethodError) as info:
        run(m.kernel, True, 2)
    error = info.value
    assert not isinstance(error, od.AmbiguityError)
    message = str(error)
    assert "no method matching h(bool, int64)" in message
    assert f"called at {m.filename}:{m.line_of('out[0] = h(x, y)')}" in message
    for line, signature in [
        ("Integer, y: od.Number", "h(x: Integer, y: Number)"),
        ("Number, y: od.Integer", "h(x: Number, y: Integer)"),
        ("Float, y: od.Float", "h(x: Float, y: Float)"),
    ]:
        assert f"{signature} at {m.filename}:{m.line_of(line) - 1}" in message


def test_method_error_in_a_callee_names_the_whole_call_path(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def g(x: od.Integer):
            return x

        def helper(x):
            return g(x)

        def kernel(out, x):
            out[0] = helper(x)
    """)
    with pytest.raises(od.MethodError) as info:
        run(m.kernel, 1.5)
    site = f"{m.filename}:{m.line_of('return g(x)')} <- {m.filename}:{m.line_of('out[0] = helper(x)')}"
    assert f"called at {site}" in str(info.value)


def test_resolving_an_ambiguity_makes_the_next_launch_work(make_module):
    m = make_module(TWO_ARGS)
    with pytest.raises(od.AmbiguityError):
        run(m.kernel, 1, 2)
    m.run("""
        @od.function
        def h(x: od.Integer, y: od.Integer):
            return 4
    """)
    assert run(m.kernel, 1, 2) == [4]


def test_generic_functions_are_callable_on_the_host(make_module):
    m = make_module(TWO_ARGS)
    assert (m.h(1, 2.0), m.h(1.0, 2), m.h(1.0, 2.0)) == (1, 2, 3)


def test_a_generic_function_with_a_default_is_called_with_and_without_it(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def scale(x: od.Integer, k: od.Integer = 3):
            return x * k

        def kernel(out):
            out[0] = scale(5)
            out[1] = scale(5, 2)
    """)
    assert run(m.kernel, n=2) == [15, 10]
    m.run("""
        @od.function
        def scale(x: od.Integer, k: od.Integer = 4):
            return x * k
    """)
    assert run(m.kernel, n=2) == [20, 10]
