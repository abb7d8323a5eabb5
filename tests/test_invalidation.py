"""Never stale, never needlessly recompiled (overdub/world.py and overdub/bindings.py, through the compiler's
caches): redefining a method or function, or rebinding a global, makes the next launch of every kernel that
consulted it recompile, and of no other; launches racing redefinitions; the invalidation log and
``od.explain``.

Each test builds its kernels in a fresh module (the ``make_module`` fixture of conftest.py) so that
redefinitions and global rebindings act on real module globals and no two tests share a generic function.
"""

import threading

import numpy as np

import overdub as od
from helpers import CALLS_F, CALLS_F_OF_X, CALLS_HELPER, compiles, method_f, methods, run

# --- redefinition and rebinding make the next launch see the new code -----------------------------------


def test_redefined_generic_method_is_used_by_the_next_launch(make_module):
    m = make_module(method_f("1") + CALLS_F)
    assert run(m.kernel) == [1]
    m.run(method_f("2"))
    assert run(m.kernel) == [2]


def test_redefined_plain_function_callee_is_used_by_the_next_launch(make_module):
    m = make_module(CALLS_HELPER)
    assert run(m.kernel) == [11]
    m.run("""
        def helper(x):
            return x * 100
    """)
    assert run(m.kernel) == [1000]


def test_rebound_global_constant_read_by_the_kernel_is_used_by_the_next_launch(make_module):
    m = make_module("""
        N = 3

        def kernel(out):
            out[0] = N
    """)
    assert run(m.kernel) == [3]
    m.N = 5
    assert run(m.kernel) == [5]


def test_rebound_global_constant_read_by_a_callee_is_used_by_the_next_launch(make_module):
    m = make_module("""
        import overdub as od
        N = 3

        def helper(x):
            return x + N

        @od.function
        def f(x: od.Integer):
            return helper(x)

        def kernel(out):
            out[0] = f(1)
    """)
    assert run(m.kernel) == [4]
    m.run("N = 40")
    assert run(m.kernel) == [41]


def test_redefining_the_end_of_a_call_chain_is_seen_through_the_chain(make_module):
    m = make_module(methods(c="1", b="c(x) + 10", a="b(x) + 100"), "def kernel(out):\n    out[0] = a(0)\n")
    assert run(m.kernel) == [111]
    m.run(methods(c="7"))
    assert run(m.kernel) == [117]


def test_more_specific_method_added_later_is_used_by_the_next_launch(make_module):
    m = make_module(methods("Number", f="1"), CALLS_F_OF_X)
    assert run(m.kernel, 5) == [1]
    m.run(method_f("2"))
    assert run(m.kernel, 5) == [2]
    assert run(m.kernel, 5.0) == [1]


def test_every_kernel_calling_a_generic_function_sees_a_method_added_later(make_module):
    # the kernels share one call site type (same context chain, same callee), whose dispatch answers are
    # kept per kernel being compiled: each kernel must hold the dispatch edge itself
    m = make_module(
        methods("Number", f="1"),
        """
        def first(out, x):
            out[0] = f(x) + f(x)

        def second(out, x):
            out[0] = f(x)
    """,
    )
    assert (run(m.first, 5), run(m.second, 5)) == ([2], [1])
    m.run(method_f("2"))
    assert (run(m.first, 5), run(m.second, 5)) == ([4], [2])


# --- nothing else recompiles ----------------------------------------------------------------------------


def test_redefining_a_function_leaves_a_kernel_that_does_not_use_it_cached(make_module):
    kernels = "\n\ndef uses_f(out):\n    out[0] = f(0)\n\n\ndef uses_g(out):\n    out[0] = g(0)\n"
    m = make_module(methods(f="1", g="2") + kernels)
    run(m.uses_f)
    run(m.uses_g)
    before = compiles()
    m.run(method_f("3"))
    assert run(m.uses_g) == [2]
    assert compiles() == before
    assert run(m.uses_f) == [3]
    assert compiles() == before + 1


def test_rebinding_an_unrelated_global_of_the_same_module_does_not_recompile(make_module):
    m = make_module("""
        N = 1
        UNRELATED = 0

        def kernel(out):
            out[0] = N
    """)
    run(m.kernel)
    before = compiles()
    m.UNRELATED = 99
    assert run(m.kernel) == [1]
    assert compiles() == before


def test_rebinding_a_global_to_an_equal_constant_does_not_recompile(make_module):
    m = make_module("""
        N = 2.5

        def kernel(out):
            out[0] = N
    """)
    run(m.kernel, dtype=np.float64)
    before = compiles()
    m.run("N = 2.5")
    assert run(m.kernel, dtype=np.float64) == [2.5]
    assert compiles() == before


def test_adding_a_method_that_does_not_apply_does_not_recompile(make_module):
    m = make_module(method_f("1") + CALLS_F)
    run(m.kernel)
    before = compiles()
    m.run("""
        @od.function
        def f(x: od.Float):
            return 2
    """)
    assert run(m.kernel) == [1]
    assert compiles() == before


# --- concurrency ----------------------------------------------------------------------------------------


def test_launches_racing_redefinitions_raise_nothing_and_end_on_the_new_method(make_module):
    m = make_module(method_f("0") + CALLS_F)
    run(m.kernel)
    stop = threading.Event()
    errors, seen = [], set()

    def launcher():
        out = np.zeros(1, dtype=np.int64)
        try:
            while not stop.is_set():
                od.cuda(m.kernel, out)
                seen.add(int(out[0]))
        except BaseException as error:  # any error is the failure
            errors.append(error)

    threads = [threading.Thread(target=launcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for version in (1, 2, 3):
            m.run(method_f(str(version)))
            stop.wait(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert seen <= {0, 1, 2, 3}
    assert run(m.kernel) == [3]


# --- what was invalidated, and why ----------------------------------------------------------------------


def test_explain_lists_an_edge_naming_the_callee(make_module):
    m = make_module(methods(callee_of_explain="1"), "def kernel(out):\n    out[0] = callee_of_explain(0)\n")
    out = np.zeros(1, dtype=np.int64)
    assert od.explain(m.kernel, out) == []
    od.cuda(m.kernel, out)
    edges = od.explain(m.kernel, out)
    assert any(e.startswith("callee_of_explain(int64) -> callee_of_explain(x: Integer)") for e in edges), edges


def test_invalidation_log_records_the_cause_and_the_kernel(make_module):
    m = make_module(methods(logged_f="1"), "def kernel(out):\n    out[0] = logged_f(0)\n")
    run(m.kernel)
    m.run(methods(logged_f="2"))
    entry = od.invalidation_log()[-1]
    assert "logged_f(x: Integer) redefined" in entry.cause
    assert "kernel kernel(array(int64, 1d, C)) in CPU/cpu" in entry.invalidated


def test_explain_groups_what_a_kernel_consulted_and_leaves_negative_facts_out_unless_asked(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def grouped(x: od.Float):
            return x * 2.0 + 1.0

        def kernel(out, x):
            out[0] = grouped(x[0]) - x[1]
    """)
    args = (np.zeros(1), np.array([1.0, 2.0]))
    od.cuda(m.kernel, *args)
    shown = od.explain(m.kernel, *args)
    everything = od.explain(m.kernel, *args, negative=True)
    assert any(e.startswith("grouped(float64) -> grouped(x: Float)") for e in shown)
    assert not any("has no methods" in e or "-> no method" in e for e in shown)
    assert any("has no methods" in e for e in everything) and len(everything) > len(shown)
    text = str(shown)
    assert "methods of generic functions (1):" in text and "negative=True" in text
    assert "<table>" in shown._repr_html_()


def test_invalidation_tree_shows_what_a_redefinition_made_stale_and_what_the_recompile_cost(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def leaf(x: od.Float):
            return x + 1.0

        @od.function
        def middle(x: od.Float):
            return leaf(x) * 2.0

        def kernel(out, x):
            out[0] = middle(x[0])
    """)
    args = (np.zeros(1), np.ones(1))
    od.cuda(m.kernel, *args)
    m.run("@od.function\ndef leaf(x: od.Float):\n    return x + 5.0\n")
    od.cuda(m.kernel, *args)
    tree = str(od.invalidation_tree())
    last = tree.split("\n\n")[-1].splitlines()
    assert last[0].startswith("leaf(x: Float) redefined at") and last[1].startswith("└─ leaf(float64) -> leaf")
    assert "middle(float64) compiled in" in last[2] and last[2].startswith("   └─ ")
    assert last[3].startswith("      └─ kernel kernel(") and " -> recompiled in " in last[3] and last[3].endswith(" ms")
    assert "<pre>" in od.invalidation_tree()._repr_html_()
