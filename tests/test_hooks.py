"""Context state and hooks (Cassette's metadata, prehook, posthook) on the CPU target, in CUDA PTX without a
GPU, and on a GPU (``-m gpu``).

A context declares the type of its device state; each launch passes a value of it, which ``od.state()``
returns in the kernel, its callees and the context's overdubs and hooks -- data of the launch, not a
constant of the code. Prehooks run before the calls they observe, posthooks after, with ``(result, *args)``.

Kernels are built with the ``make_module`` fixture (source written to a real file, so errors name lines).
"""

import re
import threading

import numba
import numpy as np
import pytest

import overdub as od
from helpers import SCALED, compiles, in_threads, methods
from overdub import launch as od_launch
from overdub.runtime import STATE_MARK, launch_key, runtime

COUNTING = """
import math
import overdub as od
from numba import cuda

prof = od.Context("prof", state=od.Array[od.int64, 1])

def f(x):
    return x + 1.0

def g(x):
    return x * 2.0

@prof.prehook(f)
def _(x):
    s = od.state()
    s[0] += 1

@prof.prehook(g)
def _(x):
    s = od.state()
    s[1] += 1

def kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(x[i]) + g(x[i]) + g(1.0)
"""


PARENT_CHILD_AND_F = """
import overdub as od

parent = od.Context("parent", state=od.Array[od.int64, 1])
child = od.Context("child", parent=parent)


def f(x):
    return x
"""
"""Module source of a context ``child`` below ``parent`` (whose launch state, an int64 array, the child shares)
and a plain function ``f(x) = x`` for their hooks; a test adds the hooks and the kernel."""


def context_and_f(state: str | None = "od.Array[od.int64, 1]") -> str:
    """Module source of a context ``ctx`` (its launch state of type ``state``, an int64 array by default) and a
    plain function ``f(x) = x`` for its hooks; a test adds the hooks and the kernel."""
    context = f'od.Context("ctx", state={state})' if state else 'od.Context("ctx")'
    return f"import overdub as od\n\nctx = {context}\n\n\ndef f(x):\n    return x\n"


def counting(make_module):
    m = make_module(COUNTING, prefix="counting")
    x = np.arange(8, dtype=np.float64)
    return m, x, np.zeros_like(x)


def count_calls(m, out, x, counts=None):
    """Launch ``counting``'s kernel on the CPU target over its 8 elements in ``prof``, counting into ``counts``
    (new zeros where None); returns ``counts``."""
    counts = np.zeros(2, dtype=np.int64) if counts is None else counts
    od.cuda(m.kernel, out, x, threads=8, context=m.prof, state=counts, target="cpu")
    return counts


# --- state ------------------------------------------------------------------------------------------------


def test_a_prehook_counts_calls_per_function_into_the_launchs_state(make_module):
    m, x, out = counting(make_module)
    counts = count_calls(m, out, x)
    assert counts.tolist() == [8, 16]
    np.testing.assert_array_equal(out, (x + 1) + 2 * x + 2)  # the calls themselves are unchanged


def test_each_launch_passes_its_own_state_to_the_same_compiled_kernel(make_module):
    m, x, out = counting(make_module)
    first, second = np.zeros(2, dtype=np.int64), np.full(2, 100, dtype=np.int64)
    od.cuda(m.kernel, out, x, threads=8, context=m.prof, state=first, target="cpu")
    before = compiles()
    od.cuda(m.kernel, out, x, threads=4, context=m.prof, state=second, target="cpu")
    od.cuda(m.kernel, out, x, threads=8, context=m.prof, state=first, target="cpu")
    assert compiles() == before  # the state is data: no recompile for a new value
    assert first.tolist() == [16, 32] and second.tolist() == [104, 108]


def test_a_scalar_state_is_read_by_an_overdub(make_module):
    m = make_module(SCALED + "def kernel(out):\n    out[0] = h(2.0)\n")
    out = np.zeros(1)
    od.cuda(m.kernel, out, context=m.scaled, state=1.5, target="cpu")
    assert out[0] == 3.0
    before = compiles()
    od.cuda(m.kernel, out, context=m.scaled, state=-4.0, target="cpu")
    assert out[0] == -8.0 and compiles() == before


def test_a_struct_state_is_passed_by_value(make_module):
    m = make_module("""
        import overdub as od

        @od.struct
        class Cfg:
            scale: od.float64
            offset: od.float64

        ctx = od.Context("ctx", state=Cfg)

        def h(x):
            return x

        @ctx.overdub(h)
        def _(x):
            c = od.state()
            return x * c.scale + c.offset

        def kernel(out):
            out[0] = h(2.0)
    """)
    out = np.zeros(1)
    od.cuda(m.kernel, out, context=m.ctx, state=m.Cfg(3.0, 1.0), target="cpu")
    assert out[0] == 7.0
    before = compiles()
    od.cuda(m.kernel, out, context=m.ctx, state=m.Cfg(-1.0, 0.5), target="cpu")
    assert out[0] == -1.5 and compiles() == before


def test_the_state_reaches_hooks_through_generic_functions_and_plain_callees(make_module):
    m = make_module(
        methods(leaf="x + 1"),
        """
        ctx = od.Context("ctx", state=od.Array[od.int64, 1])

        def middle(x):
            return leaf(x) * 2

        @ctx.posthook(leaf)
        def _(result, x):
            od.state()[0] += result

        def kernel(out):
            out[0] = middle(1) + middle(2)
    """,
    )
    out, s = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, context=m.ctx, state=s, target="cpu")
    assert out[0] == 4 + 6 and s[0] == 2 + 3


def test_state_from_two_host_threads_goes_to_each_threads_own_launches(make_module):
    m, x, _ = counting(make_module)
    states = [np.zeros(2, dtype=np.int64) for _ in range(4)]

    def work(s):
        out = np.zeros_like(x)
        for _ in range(25):
            od.cuda(m.kernel, out, x, threads=8, context=m.prof, state=s, target="cpu")

    assert in_threads(work, states) == []
    assert [s.tolist() for s in states] == [[200, 400]] * 4


def test_a_launch_with_state_is_cached_under_the_key_the_native_lookup_builds(make_module):
    m, x, out = counting(make_module)
    counts = count_calls(m, out, x)
    key = launch_key(m.kernel, m.prof, "cpu", (out, x), counts)
    assert key[3] is STATE_MARK and len(runtime.launches[key]) == 1
    slow = []
    pytest.importorskip("overdub._fastlaunch")
    od_launch.install_lookup(lambda *a, **options: slow.append(a) or od_launch.launch_slow(*a, **options))
    try:
        count_calls(m, out, x, counts)  # found by the native lookup
    finally:
        od_launch.install_lookup()
    assert not slow and counts.tolist() == [16, 32]


def test_the_state_reaches_calls_in_closures_numba_inlines_and_varargs_functions(make_module):
    m = make_module("""
        import overdub as od

        ctx = od.Context("ctx", state=od.Array[od.int64, 1])

        def f(x):
            return x + 1

        @ctx.prehook(f)
        def _(x):
            od.state()[0] += 1

        def varargs(*xs):
            return f(xs[0]) + len(xs)

        def kernel(out):
            k = 3
            g = lambda y: f(y) + k
            out[0] = g(1) + varargs(1, 2, 3)
    """)
    s, out = np.zeros(1, dtype=np.int64), np.zeros(1)
    od.cuda(m.kernel, out, context=m.ctx, state=s, target="cpu")
    assert out[0] == 5 + 5 and s[0] == 2


def test_the_pure_python_launch_path_passes_state_too(make_module):
    m, x, out = counting(make_module)
    counts = np.zeros(2, dtype=np.int64)
    for _ in range(2):  # the slow path, then a cached launch function
        od_launch._python_cuda(m.kernel, out, x, threads=8, target="cpu", context=m.prof, state=counts)
    assert counts.tolist() == [16, 32]


def test_a_closure_kernel_gets_its_captured_values_after_the_state(make_module):
    m = make_module(
        COUNTING
        + """
def make(k):
    def closure_kernel(out):
        out[0] = f(k)
    return closure_kernel
"""
    )
    out, counts = np.zeros(1), np.zeros(2, dtype=np.int64)
    od.cuda(m.make(3.0), out, context=m.prof, state=counts, target="cpu")
    od.cuda(m.make(5.0), out, context=m.prof, state=counts, target="cpu")
    assert out[0] == 6.0 and counts.tolist() == [2, 0]


# --- state errors -----------------------------------------------------------------------------------------


def test_a_launch_of_a_stateful_context_without_state_is_an_error(make_module):
    m, x, out = counting(make_module)
    with pytest.raises(TypeError, match=r"declares state of type .*pass its value"):
        od.cuda(m.kernel, out, x, context=m.prof, target="cpu")


def test_a_state_of_the_wrong_type_is_an_error(make_module):
    m, x, out = counting(make_module)
    od.cuda(
        m.kernel, out, x, context=m.prof, state=np.zeros(2, dtype=np.int64), target="cpu"
    )  # a cached launch function...
    with pytest.raises(TypeError, match=r"declares state of type .*not array\(float64"):
        od.cuda(m.kernel, out, x, context=m.prof, state=np.zeros(2), target="cpu")
    with pytest.raises(TypeError, match=r"declares state of type .*not int64"):
        od.cuda(m.kernel, out, x, context=m.prof, state=3, target="cpu")
    with pytest.raises(TypeError, match=r"declares state of type .*not array\(int64, 2d"):  # ...whose guard
        od.cuda(m.kernel, out, x, context=m.prof, state=np.zeros((2, 2), dtype=np.int64), target="cpu")  # rejects it


def test_state_for_a_context_without_state_is_an_error(make_module):
    m, x, out = counting(make_module)
    with pytest.raises(TypeError, match="declares no state"):
        od.cuda(m.kernel, out, x, context=od.Context("plain"), state=np.zeros(2, dtype=np.int64), target="cpu")


def test_od_state_in_a_launch_without_state_names_its_line(make_module):
    m = make_module("""
        import overdub as od

        ctx = od.Context("ctx")

        def h(x):
            return x

        @ctx.overdub(h)
        def _(x):
            return x + od.state()

        def kernel(out):
            out[0] = h(1.0)
    """)
    with pytest.raises(od.CompileError, match=rf"od.state\(\) called at .*{m.filename}:{m.line_of('od.state()')}"):
        od.cuda(m.kernel, np.zeros(1), context=m.ctx, target="cpu")


def test_od_state_on_the_host_says_where_it_belongs():
    with pytest.raises(RuntimeError, match="inside a kernel launched with"):
        od.state()


def test_a_child_context_inherits_its_parents_state_declaration():
    parent = od.Context("parent", state=od.int64)
    assert od.Context("child", parent=parent).state is od.int64
    assert od.Context("own", parent=parent, state=od.Float).state is od.Float


# --- hooks ------------------------------------------------------------------------------------------------

SEQUENCE = """
import overdub as od

ctx = od.Context("ctx", state=od.Array[od.int64, 1])

def tick(i):
    s = od.state()
    s[i] = s[0] + 1
    s[0] += 1

def f(x):
    tick(3)
    return x + 1

@ctx.prehook(f)
def _(x):
    tick(1)

@ctx.overdub(f)
def _(x):
    tick(2)
    return f(x) * 10

@ctx.posthook(f)
def _(result, x):
    tick(4)
    od.state()[5] = result

def kernel(out):
    out[0] = f(1)
"""


def test_a_prehook_runs_before_the_overdub_and_a_posthook_after_with_the_result(make_module):
    m = make_module(SEQUENCE)
    s = np.zeros(6, dtype=np.int64)
    od.cuda(m.kernel, np.zeros(1, dtype=np.int64), context=m.ctx, state=s, target="cpu")
    # s[i] is the order event i happened in: prehook 1st, overdub 2nd, f 3rd, posthook 4th (result 20)
    assert s[1:].tolist() == [1, 2, 3, 4, 20]


def test_hooks_dispatch_on_their_annotations(make_module):
    m = make_module(
        context_and_f(),
        """
        @ctx.prehook(f)
        def _(x: od.Integer):
            od.state()[0] += 1

        @ctx.prehook(f)
        def _(x: od.Float):
            od.state()[1] += 1

        @ctx.posthook(f)
        def _(result: od.Float, x):
            od.state()[2] += 1

        def kernel(out):
            out[0] = f(1) + f(2) + f(1.5)
    """,
    )
    s = np.zeros(3, dtype=np.int64)
    od.cuda(m.kernel, np.zeros(1), context=m.ctx, state=s, target="cpu")
    assert s.tolist() == [2, 1, 1]


GEN = """
import math
import overdub as od
from numba import cuda, float64

@od.function
def gen(x: od.Float):
    return plain(x) + 1.0

def plain(x):
    return math.sin(x)
"""
"""Module source of the call tree gen -> plain -> math.sin, for hooks to observe."""

ANY = (
    GEN
    + """
ctx = od.Context("ctx", state=od.Array[od.int64, 1])

@ctx.prehook(od.Any)
def _(*args):
    cuda.atomic.add(od.state(), 0, 1)

def kernel(out):
    i = cuda.grid(1)                  # a call too
    scratch = cuda.local.array(2, float64)
    scratch[0] = gen(0.5)             # gen -> plain -> math.sin
    out[i] = scratch[0]
    cuda.atomic.add(out, 0, 0.0)      # numba-cuda's atomics are no functions: not observed on either target
"""
)


def test_a_prehook_of_any_observes_every_call_of_the_call_tree(make_module):
    m = make_module(ANY)
    s = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, np.zeros(4), threads=4, context=m.ctx, state=s, target="cpu")
    assert s[0] == 4 * 4  # cuda.grid, gen, plain, math.sin in each thread; the hook's own calls unobserved


def test_a_prehook_of_any_observes_the_same_calls_on_the_cuda_target(make_module):
    m = make_module(ANY)
    ptx = od.code_ptx(m.kernel, numba.float64[::1], context=m.ctx, state=numba.int64[::1])
    assert ptx.count("atom.global.add.u64") == 4 and ptx.count("atom.global.add.f64") == 1


def test_a_child_contexts_hooks_and_its_parents_both_run_the_childs_enclosing(make_module):
    m = make_module(
        PARENT_CHILD_AND_F,
        """
        def tick(i):
            s = od.state()
            s[i] = s[0] + 1
            s[0] += 1

        @child.prehook(f)
        def _(x):
            tick(1)

        @parent.prehook(f)
        def _(x):
            tick(2)

        @parent.posthook(f)
        def _(r, x):
            tick(3)

        @child.posthook(f)
        def _(r, x):
            tick(4)

        def kernel(out):
            out[0] = f(1)
    """,
    )
    s = np.zeros(5, dtype=np.int64)
    od.cuda(m.kernel, np.zeros(1), context=m.child, state=s, target="cpu")
    assert s[1:].tolist() == [1, 2, 3, 4]


def test_a_parent_observes_what_a_childs_overdub_calls_not_the_call_the_overdub_took(make_module):
    m = make_module(
        PARENT_CHILD_AND_F,
        """
        @child.overdub(f)
        def _(x):
            return f(x) + f(x)        # two calls of the next implementation

        @parent.prehook(f)
        def _(x):
            od.state()[0] += 1

        def kernel(out):
            out[0] = f(1)
    """,
    )
    s = np.zeros(1, dtype=np.int64)
    out = np.zeros(1)
    od.cuda(m.kernel, out, context=m.child, state=s, target="cpu")
    assert out[0] == 2 and s[0] == 2


def test_hooks_take_keyword_arguments_positionally_and_observe_void_calls(make_module):
    m = make_module("""
        import overdub as od

        ctx = od.Context("ctx", state=od.Array[od.float64, 1])

        def f(x, y=2.0):
            return x * y

        def store(a, i):
            a[i] = 5.0

        @ctx.prehook(f)
        def _(x, y):
            od.state()[0] += y

        @ctx.prehook(f)
        def _(x):
            od.state()[1] += x

        @ctx.posthook(store)
        def _(result, a, i):
            od.state()[2] += i

        def kernel(out):
            out[0] = f(1.0) + f(1.0, 3.0) + f(1.0, y=4.0)
            store(out, 1)
    """)
    s, out = np.zeros(3), np.zeros(2)
    od.cuda(m.kernel, out, context=m.ctx, state=s, target="cpu")
    assert out.tolist() == [2.0 + 3.0 + 4.0, 5.0]
    assert s.tolist() == [3.0 + 4.0, 1.0, 1.0]


def test_ambiguous_hooks_are_an_error_naming_the_call(make_module):
    m = make_module("""
        import overdub as od

        ctx = od.Context("ctx")

        def f(x, y):
            return x + y

        @ctx.prehook(f)
        def _(x: od.Integer, y: od.Number):
            pass

        @ctx.prehook(f)
        def _(x: od.Number, y: od.Integer):
            pass

        def kernel(out):
            out[0] = f(1, 2)
    """)
    with pytest.raises(
        od.AmbiguityError,
        match=rf"(?s)ctx.prehook\(f\)\(int64, int64\) is ambiguous.*"
        rf"{m.filename}:{m.line_of('out[0] = f(1, 2)')}",
    ):
        od.cuda(m.kernel, np.zeros(1, dtype=np.int64), context=m.ctx, target="cpu")


def test_a_catch_all_hook_with_annotations_is_refused():
    ctx = od.Context("ctx")

    def f(x):
        return x

    with pytest.raises(TypeError, match=r"ctx.prehook\(.*f\): a hook taking \*args .* no annotations \(x\)"):

        @ctx.prehook(f)
        def _(x: od.Float, *rest):
            pass


def test_hooks_work_in_a_context_without_state(make_module, capfd):
    m = make_module(
        context_and_f(state=None),
        """
        @ctx.prehook(f)
        def _(x):
            print("before", x)

        def kernel(out):
            out[0] = f(7)
    """,
    )
    od.cuda(m.kernel, np.zeros(1), context=m.ctx, target="cpu")
    assert "before 7" in capfd.readouterr().out


# --- invalidation -----------------------------------------------------------------------------------------


def test_adding_a_hook_recompiles_a_kernel_compiled_without_it(make_module):
    m, x, out = counting(make_module)
    counts = count_calls(m, out, x)
    m.run("""
        @prof.posthook(f)
        def _(result, x):
            s = od.state()
            s[0] += 100
    """)
    before = compiles()
    count_calls(m, out, x, counts)
    assert compiles() == before + 1
    assert counts.tolist() == [8 + 8 * 101, 32]


def test_redefining_a_hook_recompiles_and_the_new_body_runs(make_module):
    m, x, out = counting(make_module)
    counts = count_calls(m, out, x)
    m.run("""
        @prof.prehook(f)
        def _(x):
            s = od.state()
            s[0] += 10
    """)
    count_calls(m, out, x, counts)
    assert counts.tolist() == [8 + 80, 32]
    assert any("prof.prehook(f)" in entry.cause for entry in od.invalidation_log())


def test_redefining_a_catch_all_hook_replaces_it(make_module):
    m = make_module(
        context_and_f(),
        """
        @ctx.prehook(f)
        def _(*args):
            od.state()[0] += 1

        def kernel(out):
            out[0] = f(1)
    """,
    )
    s = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, np.zeros(1), context=m.ctx, state=s, target="cpu")
    m.run("""
        @ctx.prehook(f)
        def _(*args):
            od.state()[0] += 10
    """)
    od.cuda(m.kernel, np.zeros(1), context=m.ctx, state=s, target="cpu")
    assert s[0] == 11


QUIET = """
quiet = od.Context("quiet")

def unrelated(x):
    return x

@quiet.prehook(unrelated)
def _(x):
    print(x)

def plain_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(x[i]) + math.sin(x[i])
"""
"""Source run in ``counting``'s module: a context hooking only a function no kernel calls, and a kernel calling
f and math.sin."""


def test_hooks_of_other_functions_leave_a_kernel_as_it_was(make_module):
    m, x, out = counting(make_module)
    m.run(QUIET)
    od.cuda(m.plain_kernel, out, x, threads=8, context=m.quiet, target="cpu")
    assert od.stats()["method_instances"] == 1  # f only: no hooked call was generated


# --- CUDA code generation (no GPU needed) ----------------------------------------------------------------


def _normalized(ptx: str) -> str:
    """PTX with the mangled names (which carry a per-compile id) replaced, and comments dropped."""
    ptx = re.sub(r"_ZN\w+", "NAME", ptx)
    return "\n".join(line for line in ptx.splitlines() if not line.lstrip().startswith("//"))


def test_a_kernel_in_a_context_with_hooks_for_other_functions_has_the_same_ptx(make_module):
    m, _, _ = counting(make_module)
    m.run(QUIET)
    m.run("@quiet.posthook(unrelated)\ndef _(r, x):\n    print(r)\n")
    arrays = (numba.float64[::1], numba.float64[::1])
    hooked = od.code_ptx(m.plain_kernel, *arrays, context=m.quiet)
    plain = od.code_ptx(m.plain_kernel, *arrays, context=od.Context("nothing"))
    assert _normalized(hooked) == _normalized(plain)
    assert "vprintf" not in hooked


def _instructions(ptx: str) -> list[str]:
    """The kernel entry's instructions, parameters renamed: what runs, not how parameters are numbered."""
    entry = _normalized(ptx[ptx.index(".entry") :])
    return [
        re.sub(r"NAME_param_\d+", "PARAM", line.strip())
        for line in entry.splitlines()
        if ";" in line and not line.strip().startswith((".", "//"))
    ]


def test_the_state_costs_a_kernel_that_does_not_read_it_its_parameter_only(make_module):
    m, _, _ = counting(make_module)
    m.run("""
        silent = od.Context("silent", state=od.Array[od.int64, 1])
    """)
    arrays = (numba.float64[::1], numba.float64[::1])
    stateful = od.code_ptx(m.kernel, *arrays, context=m.silent, state=numba.int64[::1])
    plain = od.code_ptx(m.kernel, *arrays, context=od.Context("nothing"))
    assert _instructions(stateful) == _instructions(plain)
    assert stateful.count(".param") > plain.count(".param")  # the array descriptor of the state


def test_a_stateful_kernel_takes_the_state_as_its_first_parameter_in_ptx(make_module):
    m, _, _ = counting(make_module)
    ptx = od.code_ptx(m.kernel, numba.float64[::1], numba.float64[::1], context=m.prof, state=numba.int64[::1])
    entry = re.search(r"\.entry\s+(\w+)", ptx).group(1)
    assert "ArrayIxLi1E1C7mutable7alignedE5ArrayIdLi1E1C" in entry  # int64 array first, then the float64s
    assert "add.s64" in ptx  # the prehooks' increments


def test_the_cuda_target_compiles_a_state_for_a_scalar_context(make_module):
    m = make_module(SCALED + "def kernel(out):\n    out[0] = h(3.0)\n")
    ptx = od.code_ptx(m.kernel, numba.float64[::1], context=m.scaled, state=numba.float32)
    assert "cvt.f64.f32" in ptx and re.search(r"mul(\.rn)?\.f64", ptx)  # the float32 state, times 3.0
    with pytest.raises(TypeError, match="declares state of type Float, not int64"):
        od.code_ptx(m.kernel, numba.float64[::1], context=m.scaled, state=numba.int64)


# --- on a GPU ---------------------------------------------------------------------------------------------

COUNTING_ATOMICALLY = COUNTING.replace("s[0] += 1", "cuda.atomic.add(s, 0, 1)").replace(
    "s[1] += 1", "cuda.atomic.add(s, 1, 1)"
)
"""COUNTING with atomic counts: threads running at once on a GPU."""


@pytest.mark.gpu
def test_gpu_prehook_counts_calls_into_a_cupy_state(make_module, cupy):
    m = make_module(COUNTING_ATOMICALLY, prefix="counting_gpu")
    x = cupy.arange(1000, dtype=cupy.float64)
    out = cupy.zeros_like(x)
    first, second = cupy.zeros(2, dtype=cupy.int64), cupy.zeros(2, dtype=cupy.int64)
    od.cuda(m.kernel, out, x, threads=128, blocks=8, context=m.prof, state=first, target="cuda")
    before = compiles()
    od.cuda(m.kernel, out, x, threads=128, blocks=8, context=m.prof, state=second, target="cuda")
    od.cuda(m.kernel, out, x, threads=128, blocks=8, context=m.prof, state=second, target="cuda")
    od.synchronize()
    assert compiles() == before
    assert first.get().tolist() == [1000, 2000] and second.get().tolist() == [2000, 4000]
    np.testing.assert_allclose(out.get(), (x + 1 + 2 * x + 2).get())


@pytest.mark.gpu
def test_gpu_two_host_threads_on_two_streams_launch_with_their_own_states(make_module, cupy):
    m = make_module(COUNTING_ATOMICALLY, prefix="counting_gpu_threads")
    x = cupy.arange(4096, dtype=cupy.float64)
    states = [cupy.zeros(2, dtype=cupy.int64) for _ in range(2)]
    outs = [cupy.zeros_like(x) for _ in range(2)]
    cupy.cuda.Device().synchronize()  # non-blocking streams do not wait for the default stream's memsets
    errors = []

    def work(s, out):
        try:
            stream = cupy.cuda.Stream(non_blocking=True)
            for _ in range(50):
                od.cuda(m.kernel, out, x, threads=256, blocks=16, context=m.prof, state=s, stream=stream, target="cuda")
            stream.synchronize()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s, out)) for s, out in zip(states, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [s.get().tolist() for s in states] == [[50 * 4096, 100 * 4096]] * 2


@pytest.mark.gpu
def test_gpu_posthook_sees_results(make_module, cupy):
    m = make_module("""
        import overdub as od
        from numba import cuda

        ctx = od.Context("ctx", state=od.Array[od.float64, 1])

        def f(x):
            return x * x

        @ctx.posthook(f)
        def _(result, x):
            od.state()[cuda.grid(1)] = result + x

        def kernel(out):
            i = cuda.grid(1)
            out[i] = f(float(i))
    """)
    out, seen = cupy.zeros(64), cupy.zeros(64)
    od.cuda(m.kernel, out, threads=64, context=m.ctx, state=seen, target="cuda")
    od.synchronize()
    i = np.arange(64.0)
    np.testing.assert_array_equal(seen.get(), i * i + i)


@pytest.mark.gpu
def test_gpu_a_scalar_state_is_launch_data(make_module, cupy):
    m = make_module(SCALED + "def kernel(out):\n    out[0] = h(2.0)\n")
    out = cupy.zeros(1)
    results = []
    for value in (1.5, -4.0, 0.25):
        od.cuda(m.kernel, out, context=m.scaled, state=value, target="cuda")
        results.append(float(out.get()[0]))
    assert results == [3.0, -8.0, 0.5] and od.stats()["compiles"] == 1


CALLEE = (
    GEN
    + """
trace = od.Context("trace", state=od.Array[od.int64, 1])

@od.function
def slot(f: od.Callee[gen]):
    return 0

@od.function
def slot(f: od.Callee[plain]):
    return 1

@od.function
def slot(f: od.Callee):
    return 2

def kernel(out):
    i = cuda.grid(1)
    out[i] = gen(0.5)

def only_plain(out):
    out[0] = plain(0.5)
"""
)


def _count(m, kernel=None, threads=4):
    s = np.zeros(3, dtype=np.int64)
    od.cuda(kernel or m.kernel, np.zeros(threads), threads=threads, context=m.trace, state=s, target="cpu")
    return s.tolist()


def test_a_hook_of_every_call_receives_the_callee_and_passes_it_on(make_module):
    m = make_module(CALLEE)
    m.run("@trace.prehook(od.Any)\ndef _(f, *args):\n    cuda.atomic.add(od.state(), slot(f), 1)\n")
    assert _count(m) == [4, 4, 8]  # gen, plain; cuda.grid and math.sin; the hook's own calls unobserved


def test_a_hook_of_every_call_dispatches_on_the_callee_and_compiles_away_for_the_others(make_module):
    m = make_module(CALLEE)
    m.run(
        "@trace.prehook(od.Any)\ndef _(f: od.Callee[gen], x):\n    cuda.atomic.add(od.state(), 0, 1001)\n\n"
        "@trace.prehook(od.Any)\ndef _(f: od.Callee[plain], *args):\n    cuda.atomic.add(od.state(), 1, 2002)\n\n"
        "@trace.posthook(od.Any)\ndef _(result, f: od.Callee[math.sin], x):\n    cuda.atomic.add(od.state(), 2, 3003)\n"
    )
    assert _count(m) == [4 * 1001, 4 * 2002, 4 * 3003]
    types = (numba.float64[::1],)
    hooked = od.code_llvm(m.kernel, *types, context=m.trace, state=numba.int64[::1], target="cpu")
    assert all(f"i64 {n}" in hooked for n in (1001, 2002, 3003))
    plain_only = od.code_llvm(m.only_plain, *types, context=m.trace, state=numba.int64[::1], target="cpu")
    assert "i64 1001" not in plain_only and all(f"i64 {n}" in plain_only for n in (2002, 3003))
    with pytest.raises(TypeError, match=r"takes od\.Callee or od\.Callee\[f\], not Integer"):
        m.run("@trace.prehook(od.Any)\ndef _(f: od.Integer, *args):\n    pass\n")
    with pytest.raises(TypeError, match=r"receives the callee first: its parameter 'x' takes od\.Callee"):
        m.run("@trace.prehook(od.Any)\ndef _(x: od.Float):\n    pass\n")  # written for the argument alone
    with pytest.raises(TypeError, match=r"receives the callee after the result \(def _\(result, f, \*args\)\)"):
        m.run("@trace.posthook(od.Any)\ndef _(result):\n    pass\n")


def test_hooks_turned_off_and_on_without_redefining_them(make_module):
    m = make_module(CALLEE)
    m.run("@trace.prehook(od.Any)\ndef _(f, *args):\n    cuda.atomic.add(od.state(), slot(f), 1)\n")
    assert _count(m) == [4, 4, 8]
    m.trace.disablehooks()
    assert _count(m) == [0, 0, 0]
    m.trace.enablehooks()
    m.trace.disablehooks(m.gen)  # gen's calls unobserved; what gen calls still observed
    assert _count(m) == [0, 4, 8]
    m.trace.enablehooks(m.gen)
    assert _count(m) == [4, 4, 8]
