"""The CPU target, end to end: kernels launched with ``od.cuda``, recompiled exactly when something they
consulted changes.

Each test builds its kernels in a fresh module (the ``make_module`` fixture of conftest.py) so that redefinitions and
global rebindings act on real module globals and no two tests share a generic function.
"""
import logging
import os
import pathlib
import runpy
import subprocess
import sys
import threading

import numpy as np
import pytest

import overdub as od
from overdub.targets.cpu import UnsupportedOnCPU

from helpers import compiles, run

REPO = pathlib.Path(__file__).resolve().parent.parent
SEED = REPO / "examples" / "seed_redefinition.py"


# --- the seed scenario ----------------------------------------------------------------------------------

def test_seed_scenario_prints_1_then_2_in_a_fresh_process():
    env = dict(os.environ, OVERDUB_TARGET="cpu")
    result = subprocess.run([sys.executable, str(SEED)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n2\n"


def test_seed_scenario_prints_1_then_2_in_process(capfd, monkeypatch):
    monkeypatch.setenv("OVERDUB_TARGET", "cpu")
    capfd.readouterr()
    runpy.run_path(str(SEED), run_name="seed_redefinition_in_process")
    assert capfd.readouterr().out == "1\n2\n"


# --- redefinition and rebinding make the next launch see the new code -----------------------------------

def test_redefined_generic_method_is_used_by_the_next_launch(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = f(0)
    """)
    assert run(m.kernel) == [1]
    m.run("""
        @od.function
        def f(x: od.Integer):
            return 2
    """)
    assert run(m.kernel) == [2]


def test_redefined_plain_function_callee_is_used_by_the_next_launch(make_module):
    m = make_module("""
        def helper(x):
            return x + 1

        def kernel(out):
            out[0] = helper(10)
    """)
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


def test_rebound_global_of_another_module_read_through_the_module_is_used(make_module):
    config = make_module("N = 3")
    m = make_module("""
        def kernel(out):
            out[0] = config.N
    """)
    m.config = config
    assert run(m.kernel) == [3]
    config.N = 8
    assert run(m.kernel) == [8]


def test_redefining_the_end_of_a_call_chain_is_seen_through_the_chain(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def c(x: od.Integer):
            return 1

        @od.function
        def b(x: od.Integer):
            return c(x) + 10

        @od.function
        def a(x: od.Integer):
            return b(x) + 100

        def kernel(out):
            out[0] = a(0)
    """)
    assert run(m.kernel) == [111]
    m.run("""
        @od.function
        def c(x: od.Integer):
            return 7
    """)
    assert run(m.kernel) == [117]


def test_more_specific_method_added_later_is_used_by_the_next_launch(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Number):
            return 1

        def kernel(out, x):
            out[0] = f(x)
    """)
    assert run(m.kernel, 5) == [1]
    m.run("""
        @od.function
        def f(x: od.Integer):
            return 2
    """)
    assert run(m.kernel, 5) == [2]
    assert run(m.kernel, 5.0) == [1]


def test_kernel_defined_in_a_closure_sees_a_redefined_generic_function():
    f = od.GenericFunction("f_closure")
    f.define(lambda x: 1, sig=(od.Integer,))

    def kernel(out):
        out[0] = f(0)

    assert run(kernel) == [1]
    f.define(lambda x: 2, sig=(od.Integer,))
    assert run(kernel) == [2]


def test_plain_function_callee_with_keyword_and_default_arguments(make_module):
    m = make_module("""
        def scaled(x, scale=2):
            return x * scale

        def kernel(out):
            out[0] = scaled(3)
            out[1] = scaled(3, scale=5)
    """)
    assert run(m.kernel, n=2) == [6, 15]


# --- nothing else recompiles ----------------------------------------------------------------------------

def test_relaunching_an_unchanged_kernel_does_not_recompile(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = 1
    """)
    run(m.kernel)
    before = compiles()
    run(m.kernel)
    assert compiles() == before


def test_redefining_a_function_leaves_a_kernel_that_does_not_use_it_cached(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        @od.function
        def g(x: od.Integer):
            return 2

        def uses_f(out):
            out[0] = f(0)

        def uses_g(out):
            out[0] = g(0)
    """)
    run(m.uses_f)
    run(m.uses_g)
    before = compiles()
    m.run("""
        @od.function
        def f(x: od.Integer):
            return 3
    """)
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


def test_a_module_level_loop_variable_neither_recompiles_nor_piles_up_launch_functions(make_module):
    from overdub import launch as launch_module
    m = make_module("""
        N = 1

        def kernel(out):
            out[0] = N
    """)
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    before = compiles()
    for i in range(20):
        m.i = i                # what `for i in ...:` at module level does to the kernel's module
        od.cuda(m.kernel, out)
    assert compiles() == before and out[0] == 1
    assert len(launch_module._launches[(m.kernel, None, None, np.ndarray)]) == 1


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
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = f(0)
    """)
    run(m.kernel)
    before = compiles()
    m.run("""
        @od.function
        def f(x: od.Float):
            return 2
    """)
    assert run(m.kernel) == [1]
    assert compiles() == before


# --- multiple dispatch and its errors -------------------------------------------------------------------

TWO_ARGS = """
    import overdub as od

    @od.function
    def h(x: od.Integer, y: od.Number):
        return 1

    @od.function
    def h(x: od.Number, y: od.Integer):
        return 2

    @od.function
    def h(x: od.Float, y: od.Float):
        return 3

    def kernel(out, x, y):
        out[0] = h(x, y)
"""


@pytest.mark.parametrize("x, y, expected", [(1, 2.0, 1), (1.0, 2, 2), (1.0, 2.0, 3)])
def test_two_argument_call_reaches_the_most_specific_method(make_module, x, y, expected):
    m = make_module(TWO_ARGS)
    assert run(m.kernel, x, y) == [expected]


def test_ambiguous_call_raises_at_launch_naming_the_kernel_line(make_module):
    m = make_module(TWO_ARGS)
    with pytest.raises(od.AmbiguityError) as info:
        run(m.kernel, 1, 2)
    message = str(info.value)
    assert "h(int64, int64) is ambiguous" in message
    assert f"called at {m.filename}:{m.line_of('out[0] = h(x, y)')}" in message


def test_ambiguous_call_lists_the_competing_methods(make_module):
    m = make_module(TWO_ARGS)
    with pytest.raises(od.AmbiguityError) as info:
        run(m.kernel, 1, 2)
    message = str(info.value)
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
    for line, signature in [("Integer, y: od.Number", "h(x: Integer, y: Number)"),
                            ("Number, y: od.Integer", "h(x: Number, y: Integer)"),
                            ("Float, y: od.Float", "h(x: Float, y: Float)")]:
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


# --- the CUDA kernel idiom on the CPU -------------------------------------------------------------------

def test_grid_1d_indexes_every_thread_of_every_block(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            if i < out.shape[0]:
                out[i] = i + 1
    """)
    assert run(m.kernel, n=13, blocks=3, threads=4) == list(range(1, 13)) + [0]


def test_thread_and_block_indices_match_the_grid_index(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            out[i] = cuda.blockIdx.x * 100 + cuda.threadIdx.x
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4) == [b * 100 + t for b in range(3) for t in range(4)]


def test_callees_read_the_same_thread_indices_as_the_kernel(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        @od.function
        def my_index():
            return cuda.grid(1)

        def block_base():
            return cuda.blockIdx.x * cuda.blockDim.x

        def kernel(out):
            i = my_index()
            out[i] = (block_base() + cuda.threadIdx.x) * 100 + cuda.grid(1)
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4) == [i * 101 for i in range(12)]


def test_grid_dimensions_are_visible_to_every_thread(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            if cuda.grid(1) == 0:
                out[0] = cuda.gridsize(1)
                out[1] = cuda.blockDim.x
                out[2] = cuda.gridDim.x
    """)
    assert run(m.kernel, n=3, blocks=3, threads=5) == [15, 5, 3]


def test_grid_2d_covers_a_2d_array(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            x, y = cuda.grid(2)
            if x < out.shape[0] and y < out.shape[1]:
                out[x, y] = x * 100 + y
    """)
    out = np.full((4, 6), -1, dtype=np.int64)
    od.cuda(m.kernel, out, blocks=(2, 3), threads=(2, 2))
    assert out.tolist() == [[x * 100 + y for y in range(6)] for x in range(4)]


def test_grid_3d_covers_a_3d_grid(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            x, y, z = cuda.grid(3)
            nx, ny, nz = cuda.gridsize(3)
            out[(z * ny + y) * nx + x] = z * 100 + y * 10 + x
    """)
    expected = [z * 100 + y * 10 + x for z in range(4) for y in range(3) for x in range(2)]
    assert run(m.kernel, n=24, blocks=(2, 1, 2), threads=(1, 3, 2)) == expected


def test_callees_read_the_grid_state_of_the_calling_thread(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        def index():
            return cuda.grid(1)

        @od.function
        def position(scale: od.Integer):
            return cuda.blockIdx.x * scale + cuda.threadIdx.x

        def kernel(out):
            out[index()] = position(100)
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4) == [b * 100 + t for b in range(3) for t in range(4)]
    assert run(m.kernel, n=12, blocks=2, threads=6) == [b * 100 + t for b in range(2) for t in range(6)]


def test_atomic_add_accumulates_over_the_grid(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, 0, 1)
            cuda.atomic.add(out, 1, cuda.grid(1))
    """)
    assert run(m.kernel, n=2, blocks=5, threads=7) == [35, sum(range(35))]


def test_local_array_works_per_thread(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            scratch = cuda.local.array(4, numba.int64)
            for k in range(4):
                scratch[k] = cuda.grid(1) + k
            out[cuda.grid(1)] = scratch[0] + scratch[3]
    """)
    assert run(m.kernel, n=4, threads=4) == [2 * i + 3 for i in range(4)]


def test_syncthreads_is_rejected_naming_the_construct_and_line(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.syncthreads()
            out[0] = 1
    """)
    with pytest.raises(UnsupportedOnCPU) as info:
        run(m.kernel)
    message = str(info.value)
    assert "cuda.syncthreads" in message and "not supported on the CPU target" in message
    assert f"{m.filename}:{m.line_of('cuda.syncthreads()')}" in message


def test_shared_array_is_rejected_naming_the_construct(make_module):
    m = make_module("""
        import numba
        from numba import cuda

        def kernel(out):
            tile = cuda.shared.array(4, numba.int64)
            out[0] = tile[0]
    """)
    with pytest.raises(UnsupportedOnCPU, match=r"cuda\.shared\.array"):
        run(m.kernel)


# --- launch arguments -----------------------------------------------------------------------------------

def test_a_kernel_is_compiled_once_per_argument_types(make_module):
    m = make_module("""
        def kernel(out, x):
            out[0] = x * 2
    """)
    assert run(m.kernel, 2, dtype=np.float64) == [4.0]
    assert run(m.kernel, 2.5, dtype=np.float64) == [5.0]
    before = compiles()
    assert run(m.kernel, 3, dtype=np.float64) == [6.0]
    assert run(m.kernel, 3.5, dtype=np.float64) == [7.0]
    assert compiles() == before


def test_each_array_layout_and_dtype_is_read_as_itself(make_module):
    m = make_module("""
        def kernel(out, a):
            for i in range(a.shape[0]):
                out[i] = a[i] * 2
    """)
    base = np.arange(8, dtype=np.float64)
    readonly = np.arange(4, dtype=np.float64)
    readonly.flags.writeable = False
    for a in [base[:4], base[::2], base[1::2], readonly, np.arange(4, dtype=np.int32),
              np.arange(4, dtype=np.float32) + 0.5, base[:4]]:
        assert run(m.kernel, a, n=4, dtype=np.float64) == (a * 2).tolist(), (a, a.flags)


def test_each_2d_layout_is_indexed_as_itself(make_module):
    m = make_module("""
        def kernel(out, m):
            out[0] = m[0, 1]
            out[1] = m[1, 0]
    """)
    c = np.array([[1, 2], [3, 4]], dtype=np.int64)
    for a in [c, np.asfortranarray(c), c.T, c[:, ::-1], c]:
        assert run(m.kernel, a, n=2) == [a[0, 1], a[1, 0]], a.flags


def test_python_int_beyond_int64_is_typed_as_on_a_first_launch(make_module):
    m = make_module("""
        def kernel(out, x):
            out[0] = x
    """)
    big = 2**63 + 5
    assert run(m.kernel, 1, dtype=np.uint64) == [1]
    assert run(m.kernel, big, dtype=np.uint64) == [big]


# --- pointers -------------------------------------------------------------------------------------------

def test_pointer_indexing_loads_and_stores(make_module):
    m = make_module("""
        def kernel(p):
            p[1] = p[0] + 1
    """)
    a = np.array([41, 0], dtype=np.int64)
    od.cuda(m.kernel, od.pointer(a))
    assert a.tolist() == [41, 42]


def test_unsafe_load_and_store_use_the_given_index(make_module):
    m = make_module("""
        import overdub as od

        def kernel(p):
            od.unsafe_store(p, od.unsafe_load(p, 2) * 2, 1)
            od.unsafe_store(p, 7)
    """)
    a = np.array([0, 0, 21], dtype=np.int32)
    od.cuda(m.kernel, od.pointer(a))
    assert a.tolist() == [7, 42, 21]


# --- compile errors -------------------------------------------------------------------------------------

def test_unsupported_python_raises_compile_error_naming_the_kernel_line(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = "not a number"
    """)
    with pytest.raises(od.CompileError) as info:
        run(m.kernel)
    message = str(info.value)
    assert "kernel" in message
    assert f'{m.filename}", line {m.line_of("not a number")}' in message


def test_a_failed_compile_leaves_an_earlier_kernel_usable(make_module):
    m = make_module("""
        def kernel(out, x):
            out[0] = x
    """)
    assert run(m.kernel, 1) == [1]
    with pytest.raises(od.CompileError):
        run(m.kernel, "text")
    before = compiles()
    assert run(m.kernel, 2) == [2]
    assert compiles() == before


def test_a_redefinition_that_fails_to_compile_never_runs_the_stale_kernel(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = f(0)
    """)
    assert run(m.kernel) == [1]
    m.run("""
        @od.function
        def f(x: od.Integer):
            return "not a number"
    """)
    for _ in range(2):
        with pytest.raises(od.CompileError):
            run(m.kernel)


def test_the_next_good_launch_after_a_failed_compile_works(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = f(0)
    """)
    run(m.kernel)
    m.run("""
        @od.function
        def f(x: od.Integer):
            return "not a number"
    """)
    with pytest.raises(od.CompileError):
        run(m.kernel)
    m.run("""
        @od.function
        def f(x: od.Integer):
            return 3
    """)
    assert run(m.kernel) == [3]


def test_a_method_error_leaves_other_argument_types_usable(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return x

        def kernel(out, x):
            out[0] = f(x)
    """)
    assert run(m.kernel, 4) == [4]
    with pytest.raises(od.MethodError):
        run(m.kernel, 4.0)
    before = compiles()
    assert run(m.kernel, 5) == [5]
    assert compiles() == before


def test_len_of_an_array_works_in_a_kernel(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = len(out)
    """)
    assert run(m.kernel, n=3) == [3, 0, 0]


def test_recursive_generic_function_raises_compile_error_naming_the_recursive_call(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def fact(n: od.Integer):
            if n <= 1:
                return 1
            return n * fact(n - 1)

        def kernel(out, n):
            out[0] = fact(n)
    """)
    with pytest.raises(od.CompileError) as info:
        run(m.kernel, 5)
    assert f"{m.filename}:{m.line_of('return n * fact(n - 1)')}" in str(info.value)


# --- concurrency ----------------------------------------------------------------------------------------

def test_launches_racing_redefinitions_raise_nothing_and_end_on_the_new_method(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 0

        def kernel(out):
            out[0] = f(0)
    """)
    run(m.kernel)
    stop = threading.Event()
    errors, seen = [], set()

    def launcher():
        out = np.zeros(1, dtype=np.int64)
        try:
            while not stop.is_set():
                od.cuda(m.kernel, out)
                seen.add(int(out[0]))
        except BaseException as error:  # noqa: BLE001 -- any error is the failure
            errors.append(error)

    threads = [threading.Thread(target=launcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for version in (1, 2, 3):
            m.run(f"""
                @od.function
                def f(x: od.Integer):
                    return {version}
            """)
            stop.wait(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert seen <= {0, 1, 2, 3}
    assert run(m.kernel) == [3]


# --- observability --------------------------------------------------------------------------------------

def _compile_records(caplog):
    return [r for r in caplog.records if r.name == "overdub" and r.levelno == logging.INFO]


def test_first_compile_logs_one_info_record_with_its_reason(make_module, caplog):
    m = make_module("""
        def kernel(out):
            out[0] = 1
    """)
    caplog.set_level(logging.INFO, logger="overdub")
    run(m.kernel)
    run(m.kernel)
    records = _compile_records(caplog)
    assert len(records) == 1
    assert "first launch of kernel(array(int64, 1d, C))" in records[0].getMessage()


def test_recompile_after_redefinition_logs_the_redefinition_and_its_location(make_module, caplog):
    m = make_module("""
        import overdub as od

        @od.function
        def f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = f(0)
    """)
    run(m.kernel)
    caplog.set_level(logging.INFO, logger="overdub")
    path = m.run("""
        @od.function
        def f(x: od.Integer):
            return 2
    """)
    run(m.kernel)
    [record] = _compile_records(caplog)
    assert f"f(x: Integer) redefined at {os.path.basename(path)}:2" in record.getMessage()


def test_recompile_after_rebinding_logs_the_global(make_module, caplog):
    m = make_module("""
        N = 1

        def kernel(out):
            out[0] = N
    """)
    run(m.kernel)
    caplog.set_level(logging.INFO, logger="overdub")
    m.N = 2
    run(m.kernel)
    [record] = _compile_records(caplog)
    assert f"global {m.__name__}.N rebound" in record.getMessage()


def test_explain_lists_an_edge_naming_the_callee(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def callee_of_explain(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = callee_of_explain(0)
    """)
    out = np.zeros(1, dtype=np.int64)
    assert od.explain(m.kernel, out) == []
    od.cuda(m.kernel, out)
    edges = od.explain(m.kernel, out)
    assert any(e.startswith("callee_of_explain(int64) -> callee_of_explain(x: Integer)") for e in edges), edges


def test_invalidation_log_records_the_cause_and_the_kernel(make_module):
    m = make_module("""
        import overdub as od

        @od.function
        def logged_f(x: od.Integer):
            return 1

        def kernel(out):
            out[0] = logged_f(0)
    """)
    run(m.kernel)
    m.run("""
        @od.function
        def logged_f(x: od.Integer):
            return 2
    """)
    entry = od.invalidation_log()[-1]
    assert "logged_f(x: Integer) redefined" in entry.cause
    assert "kernel kernel(array(int64, 1d, C)) in CPU/cpu" in entry.invalidated


def test_stats_count_launches(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = 1
    """)
    before = od.stats()["launches"]
    run(m.kernel)
    run(m.kernel)
    assert od.stats()["launches"] == before + 2


# --- printing -------------------------------------------------------------------------------------------

def test_print_in_a_kernel_writes_to_stdout_at_the_end_of_the_launch(make_module, capfd):
    m = make_module("""
        def kernel(x, y, flag):
            print(x, y, flag, "done")
    """)
    capfd.readouterr()
    od.cuda(m.kernel, 3, 2.5, True)
    assert capfd.readouterr().out == "3 2.5 True done\n"


def test_print_runs_once_per_thread(make_module, capfd):
    m = make_module("""
        from numba import cuda

        def kernel():
            print(cuda.grid(1))
    """)
    capfd.readouterr()
    od.cuda(m.kernel, blocks=2, threads=2)
    assert capfd.readouterr().out == "0\n1\n2\n3\n"


def test_a_kernel_that_does_not_print_prints_nothing(make_module, capfd):
    m = make_module("""
        def kernel(out):
            out[0] = 1
    """)
    capfd.readouterr()
    run(m.kernel)
    assert capfd.readouterr() == ("", "")


def test_vector_loads_and_stores_move_whole_groups_of_elements(make_module):
    m = make_module("""
        import overdub as od
        from numba import cuda

        def kernel(x, y):
            i = cuda.grid(1)
            xs = od.vload(x, i, 4)
            od.vstore(y, (xs[3], xs[2], xs[1], xs[0] + 100), i)
    """)
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, dtype=np.float32)
    od.cuda(m.kernel, od.pointer(x), od.pointer(y), threads=2)
    assert y.tolist() == [3, 2, 1, 100, 7, 6, 5, 104]
    assert od.vload(od.pointer(x), 1, 4) == (4, 5, 6, 7)      # the host version


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
