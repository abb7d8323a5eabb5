"""Everything a launch's meaning depends on is an edge: closure cells, a function's code and defaults replaced
in place (what %autoreload does), global values compared as data (-0.0, nan), and only real globals."""

import sys

import numpy as np
import pytest
from numba import cuda as numba_cuda

import overdub as od
from helpers import WRITES_ONE, compiles, run


def test_reassigning_a_captured_variable_is_seen_by_the_next_launch():
    k = 1

    def kernel(out):
        out[0] = k

    assert run(kernel) == [1]
    k = 2
    assert run(kernel) == [2]


def test_a_nonlocal_assignment_is_seen_by_the_next_launch():
    def make():
        scale = 3

        def kernel(out):
            out[0] = scale

        def set_scale(value):
            nonlocal scale
            scale = value

        return kernel, set_scale

    kernel, set_scale = make()
    assert run(kernel) == [3]
    set_scale(7)
    assert run(kernel) == [7]


def test_redefining_a_captured_local_helper_is_seen_by_the_next_launch():
    def helper(x):
        return x + 1

    def kernel(out):
        out[0] = helper(10)

    assert run(kernel) == [11]

    def helper(x):  # noqa: F811  (the redefinition is the point)
        return x + 2

    assert run(kernel) == [12]


def test_reassigning_a_captured_variable_to_an_equal_value_does_not_recompile():
    k = 2.5

    def kernel(out):
        out[0] = k

    run(kernel, dtype=np.float64)
    before = compiles()
    k = float("2.5")
    assert run(kernel, dtype=np.float64) == [2.5] and compiles() == before


def test_replacing_the_kernels_code_in_place_runs_the_new_code(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = 1

        def other(out):
            out[0] = 2
    """)
    assert run(m.kernel) == [1]
    m.kernel.__code__ = m.other.__code__  # what %autoreload 2 does to `from mod import kernel`
    assert run(m.kernel) == [2]


def test_replacing_a_callees_code_in_place_runs_the_new_code(make_module):
    m = make_module("""
        def helper(x):
            return x + 1

        def new_helper(x):
            return x + 100

        def kernel(out):
            out[0] = helper(1)
    """)
    assert run(m.kernel) == [2]
    m.helper.__code__ = m.new_helper.__code__
    assert run(m.kernel) == [101] == [m.helper(1)]


def test_replacing_a_callees_defaults_in_place_is_seen(make_module):
    m = make_module("""
        def helper(x, k=1):
            return x + k

        def kernel(out):
            out[0] = helper(10)
    """)
    assert run(m.kernel) == [11]
    m.helper.__defaults__ = (5,)
    assert run(m.kernel) == [15]


def test_replacing_code_with_equal_code_does_not_recompile(make_module):
    m = make_module(WRITES_ONE)
    run(m.kernel)
    before = compiles()
    m.kernel.__code__ = m.kernel.__code__.replace()
    assert run(m.kernel) == [1] and compiles() == before


def test_a_global_rebound_from_zero_to_negative_zero_is_seen(make_module):
    m = make_module("""
        import math
        X = 0.0

        def kernel(out):
            out[0] = math.copysign(1.0, X)
    """)
    assert run(m.kernel, dtype=np.float64) == [1.0]
    m.X = -0.0
    assert run(m.kernel, dtype=np.float64) == [-1.0]


@pytest.mark.parametrize("in_c", [True, False], ids=["in C", "in Python"])
def test_the_fast_check_sees_a_rebound_global_in_c_and_in_python(make_module, monkeypatch, in_c):
    """Guard.fresh compares each watched word with the value it had: in C over the guard's ``words`` (kept up to
    date as checks are added) where the extension is built, in Python where it is not (or some word has no
    view); either way a rebinding of a global the kernel read is seen by its next launch."""
    from overdub import bindings
    from overdub.runtime import launch_key, runtime

    if in_c and bindings.words_fresh is None:
        pytest.skip("the native extension is not built")
    m = make_module("""
        from numba import cuda
        SCALE = 2.0

        def kernel(out):
            out[0] = SCALE
    """)
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    (launch,) = runtime.launches[launch_key(m.kernel, None, "cpu", (out,))]
    guard = launch.kernel.guard
    if not in_c:
        monkeypatch.setattr(guard, "words", None)  # what a build without the extension keeps
    else:
        watched = {address for address, _, _ in guard.native_checks() or []}
        assert guard.words is not None and len(guard.words) == 16 * len(watched) == 16 * len(guard._checks)
    assert guard.fresh()
    m.SCALE = 3.0
    assert not guard.fresh()
    od.cuda(m.kernel, out, target="cpu")
    assert out[0] == 3.0
    assert guard.fresh() or not launch.kernel.valid  # the old kernel's guard recorded the move, or it died


def test_a_loop_rebinding_other_globals_keeps_launches_native_and_sees_the_kernels_own(make_module, monkeypatch):
    """A loop at a module's top level (a script, a notebook cell) rebinds its variable at each turn, moving the
    module's version tag: the launch function compares the globals the kernel read in place and stays native
    (2.6 -> 0.55 us a launch on the 2-core machine), its slow check not called; a rebinding of one of them, or
    a global shadowing a builtin the kernel calls, is still seen by the next launch."""
    from overdub import bindings
    from overdub.runtime import launch_key, runtime

    if bindings.words_fresh is None:
        pytest.skip("the native extension is not built")
    m = make_module("""
        from numba import cuda
        SCALE = 2.0

        def kernel(out):
            out[0] = SCALE + abs(-1.0)
    """)
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    (launch,) = runtime.launches[launch_key(m.kernel, None, "cpu", (out,))]
    checked = []
    usable = type(launch.kernel).usable
    monkeypatch.setattr(type(launch.kernel), "usable", lambda self: checked.append(self) or usable(self))
    for turn in range(20):
        m.turn = turn
        od.cuda(m.kernel, out, target="cpu")
        assert out[0] == 3.0
    assert checked == []
    m.SCALE = 5.0
    od.cuda(m.kernel, out, target="cpu")
    assert out[0] == 6.0 and checked
    m.run("def abs(x):\n    return 10.0")
    od.cuda(m.kernel, out, target="cpu")
    assert out[0] == 15.0


def test_re_running_a_nan_assignment_does_not_recompile(make_module):
    m = make_module("""
        X = float("nan")

        def kernel(out):
            out[0] = X
    """)
    run(m.kernel, dtype=np.float64)
    before = compiles()
    m.run('X = float("nan")')
    assert np.isnan(run(m.kernel, dtype=np.float64)[0]) and compiles() == before


def test_rebinding_globals_named_like_attributes_does_not_recompile(make_module):
    m = make_module("""
        from numba import cuda
        x = y = 0

        def kernel(out):
            out[cuda.threadIdx.x] = cuda.threadIdx.x
    """)
    run(m.kernel, n=4, threads=4)
    before = compiles()
    m.x, m.y = 1, 2
    assert run(m.kernel, n=4, threads=4) == [0, 1, 2, 3] and compiles() == before


def test_a_module_attribute_that_does_not_exist_is_an_error_not_a_builtin(make_module):
    m = make_module("""
        import math

        def kernel(out):
            out[0] = math.max(1, 2)
    """)
    with pytest.raises(AttributeError, match=rf"'math' has no attribute 'max' \(at {m.filename}:5\)"):
        run(m.kernel)


def test_od_explain_lists_a_captured_helper_and_the_kernels_code():
    def helper(x):
        return x + 1

    def kernel(out):
        out[0] = helper(1)

    out = np.zeros(1, dtype=np.int64)
    od.cuda(kernel, out)
    edges = od.explain(kernel, out)
    assert any("captured variable" in e and ".helper" in e for e in edges)
    assert any(e.startswith("code of ") and "kernel" in e for e in edges)


# --- closures capturing data: compiled once per definition, the captured values passed at each launch ----


def test_closures_made_by_a_factory_share_one_compile_and_each_runs_its_own_value(make_module):
    m = make_module("""
        def make_scaler(k):
            def scale(out, x):
                out[0] = k * x
            return scale
    """)
    kernels = [m.make_scaler(k) for k in range(20)]
    before = compiles()
    results = []
    for kernel in kernels:
        out = np.zeros(1, dtype=np.int64)
        od.cuda(kernel, out, 3)
        results.append(int(out[0]))
    assert results == [3 * k for k in range(20)] and compiles() == before + 1


def test_reassigning_a_captured_number_changes_the_data_not_the_code():
    k = 1

    def kernel(out):
        out[0] = k

    assert run(kernel) == [1]
    before = compiles()
    for k in range(2, 6):  # the loop variable is what the kernel captures
        assert run(kernel) == [k]
    assert compiles() == before


def test_a_captured_value_of_a_new_type_compiles_for_that_type():
    k = 2

    def kernel(out):
        out[0] = k * 1.5

    assert run(kernel, dtype=np.float64) == [3.0]
    k = 2.5
    assert run(kernel, dtype=np.float64) == [3.75]


def test_a_captured_array_is_read_as_it_is_at_each_launch():
    table = np.arange(4)

    def kernel(out):
        out[0] = table[2]

    assert run(kernel) == [2]
    table[2] = 40  # in place: as an argument, the kernel sees the array's current contents
    assert run(kernel) == [40]


def test_replacing_a_closure_kernels_code_in_place_runs_the_new_code():
    k = 3

    def kernel(out):
        out[0] = k

    def other(out):
        out[0] = k + 100

    assert run(kernel) == [3]
    kernel.__code__ = other.__code__
    assert run(kernel) == [103]


def test_a_default_arity_method_dispatches_to_a_more_specific_method_added_later(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def d(x, k=5):
            return 1

        def kernel(out):
            out[0] = d(1)
    """)
    assert run(m.kernel) == [1] and m.d(1) == 1
    m.run("""
        @od.function
        def d(x: od.Integer, k: od.Integer):
            return 2
    """)
    assert run(m.kernel) == [2] and m.d(1) == 2


DEFAULTED = """
import overdub as od


@od.function
def d(x, k=5):
    return x + k
"""
"""Module source of ``d(x, k=5)``: a method of two arguments, and one of one calling it with k=5."""


def test_a_default_arity_method_runs_a_redefined_full_method(make_module):
    m = make_module(
        DEFAULTED,
        """
        @od.function
        def e(x):
            return d(x)

        def kernel(out):
            out[0] = e(1)
    """,
    )
    assert run(m.kernel) == [6]
    m.run("""
        import overdub as od
        @od.function
        def d(x, k):
            return x * k
    """)
    assert run(m.kernel) == [5] and m.d(1) == 5


def test_a_context_overdub_of_the_full_arity_reaches_default_arity_calls(make_module):
    m = make_module(
        DEFAULTED,
        """
        ctx = od.Context("double")

        @ctx.overdub(d)
        def _(x, k):
            return 2 * (x + k)

        def kernel(out):
            out[0] = d(1)
    """,
    )
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, context=m.ctx)
    assert out[0] == 12


# --- identity: a name is a binding ------------------------------------------------------------------------


def test_closures_from_one_factory_are_separate_generic_functions():
    def make(k):
        @od.function
        def times(x):
            return k * x

        return times

    times2, times3 = make(2), make(3)
    assert times2 is not times3 and (times2(5), times3(5)) == (10, 15)

    def kernel(out):
        out[0] = times2(5)

    assert run(kernel) == [10]


def test_defs_execd_into_two_namespaces_are_separate_generic_functions():
    source = "import overdub as od\n@od.function\ndef f(x):\n    return {}\n"
    a, b = {"__name__": "cells"}, {"__name__": "cells"}  # two fresh namespaces of one module name
    exec(source.format(1), a)
    exec(source.format(2), b)
    assert a["f"] is not b["f"] and (a["f"](0), b["f"](0)) == (1, 2)


def test_a_def_named_like_an_imported_generic_function_extends_it(make_module, monkeypatch):
    lib = make_module(
        """
        import overdub as od

        @od.function
        def area(x: od.Integer):
            return 1
    """,
        prefix="lib",
    )
    monkeypatch.setitem(sys.modules, lib.__name__, lib)
    user = make_module(f"""
        import overdub as od
        from {lib.__name__} import area

        @od.function
        def area(x: od.Float):
            return 2.5
    """)
    assert user.area is lib.area and (lib.area(1), lib.area(1.0)) == (1, 2.5)


def test_an_overdub_of_one_lambda_does_not_apply_to_another():
    first, second = (lambda x: x + 1), (lambda x: x + 2)
    ctx = od.Context("one lambda")

    @ctx.overdub(first)
    def _(x):
        return 100

    def kernel(out):
        out[0] = first(0)
        out[1] = second(0)

    out = np.zeros(2, dtype=np.int64)
    od.cuda(kernel, out, context=ctx)
    assert out.tolist() == [100, 2]


# --- contexts: parents and forwards are edges -----------------------------------------------------------


def test_reassigning_a_contexts_parent_is_seen_by_the_next_launch():
    def helper(x):
        return x

    outer, other = od.Context("outer"), od.Context("other")

    @outer.overdub(helper)
    def _(x):
        return 1

    @other.overdub(helper)
    def _(x):
        return 2

    ctx = od.Context("child", parent=outer)

    def kernel(out):
        out[0] = helper(0)

    out = np.zeros(1, dtype=np.int64)
    od.cuda(kernel, out, context=ctx)
    assert out[0] == 1
    ctx.parent = other
    od.cuda(kernel, out, context=ctx)
    assert out[0] == 2


def test_a_forward_added_after_a_launch_is_seen_by_the_next_launch():
    def helper(x):
        return x + 1

    def replacement(x):
        return x + 50

    ctx = od.Context("forwarding")

    def kernel(out):
        out[0] = helper(0)

    out = np.zeros(1, dtype=np.int64)
    od.cuda(kernel, out, context=ctx)
    assert out[0] == 1
    ctx.forward(helper, replacement)
    od.cuda(kernel, out, context=ctx)
    assert out[0] == 50


def test_a_closure_using_a_captured_value_as_a_constant_compiles_with_it_as_a_constant():
    def make(n):
        def kernel(out):  # captures n alone (a local `cuda` would be captured too, and nothing lifted)
            tmp = numba_cuda.local.array(n, np.int64)  # numba needs the shape at compile time
            for i in range(n):
                tmp[i] = i * i
            out[0] = tmp[n - 1]

        return kernel

    assert run(make(4)) == [9]
    assert run(make(5)) == [16]


def test_the_first_launch_of_a_closure_that_cannot_be_lifted_takes_only_the_launchs_own_arguments():
    """Its lifted form does not compile, so the kernel compiled is the closure as it is: the launch function
    made for the call must pass the arguments that kernel takes, not the captured values too (on CUDA those
    would fill the kernel's first parameter slots)."""
    from overdub.call import KernelCall

    def make(n):
        def kernel(out):  # captures n alone (numba_cuda is a global): a closure over data, lifted first
            tmp = numba_cuda.local.array(n, np.int64)  # numba needs the shape at compile time: lifting fails
            tmp[n - 1] = 7
            out[0] = tmp[n - 1] + n

        return kernel

    out = np.zeros(1, np.int64)
    call = KernelCall.of(make(3), (out,), "cpu")
    assert call.lifted is not None  # lifting is tried first
    kernel = call.compiled()
    assert kernel.job.argtypes == (call.arguments[-1].type,)  # the closure as it is: one parameter
    launch = call.launch_function(kernel)
    assert launch((out,), 1, 1, 0, None) is True and out[0] == 10


def test_a_decorator_wrapping_od_function_still_extends_the_module_level_generic_function(make_module):
    m = make_module("""
        import overdub as od

        def device(f):                       # a user's own decorator
            return od.function(f)

        @device
        def f(x: od.Integer):
            return 1

        @device
        def f(x: od.Float):
            return 2
    """)
    assert len(od.methods(m.f)) == 2 and (m.f(1), m.f(1.0)) == (1, 2)


def test_a_closure_whose_file_was_edited_since_it_was_defined_runs_the_code_it_has(make_module):
    m = make_module("""
        def make(k):
            def kernel(out):
                out[0] = k + 1
            return kernel
    """)
    kernel = m.make(10)
    source_file = kernel.__code__.co_filename
    with open(source_file) as f:
        text = f.read()
    with open(source_file, "w") as f:  # edited on disk, not re-run: the closure still has the old code
        f.write(text.replace("k + 1", "k + 1000"))
    import linecache

    linecache.checkcache(source_file)
    assert run(kernel) == [11]


def test_a_factory_defined_inside_a_test_function_also_lifts():
    def make(k):
        def kernel(out):
            out[0] = k

        return kernel

    before = compiles()
    for k in range(5):
        assert run(make(k)) == [k]
    assert compiles() == before + 1
