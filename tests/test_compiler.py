"""The compiler driver and its kernel cache (overdub/compiler.py): one compile per kernel and argument
types, none on a relaunch; CompileErrors naming the kernel's real ``file.py:LINE`` (recursion too), and
what a failed compile leaves usable; one INFO log record per compile, giving its reason.
"""

import logging
import os

import numpy as np
import pytest
from numba.core.errors import TypingError

import overdub as od
from helpers import CALLS_F, CALLS_F_OF_X, WRITES_ONE, compiles, method_f, run

# --- the kernel cache -----------------------------------------------------------------------------------


def test_relaunching_an_unchanged_kernel_does_not_recompile(make_module):
    m = make_module(WRITES_ONE)
    run(m.kernel)
    before = compiles()
    run(m.kernel)
    assert compiles() == before


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


# --- compile errors -------------------------------------------------------------------------------------


def test_unsupported_python_raises_compile_error_naming_the_kernel_line(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = ord(1.5)  # not a number (a store of a string reports overdub's MethodError once a test's
    """)  # struct defined __setitem__, in whatever order the tests run)
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
    with pytest.raises(TypingError):  # numba's report, or setitem's MethodError once a struct defined one
        run(m.kernel, "text")
    before = compiles()
    assert run(m.kernel, 2) == [2]
    assert compiles() == before


def test_a_redefinition_that_fails_to_compile_never_runs_the_stale_kernel(make_module):
    m = make_module(method_f("1") + CALLS_F)
    assert run(m.kernel) == [1]
    m.run(method_f('"not a number"'))
    for _ in range(2):
        with pytest.raises(TypingError):  # numba's report, or setitem's MethodError once a struct defined one
            run(m.kernel)


def test_the_next_good_launch_after_a_failed_compile_works(make_module):
    m = make_module(method_f("1") + CALLS_F)
    run(m.kernel)
    m.run(method_f('"not a number"'))
    with pytest.raises(TypingError):  # numba's report, or setitem's MethodError once a struct defined one
        run(m.kernel)
    m.run(method_f("3"))
    assert run(m.kernel) == [3]


def test_a_method_error_leaves_other_argument_types_usable(make_module):
    m = make_module(method_f("x") + CALLS_F_OF_X)
    assert run(m.kernel, 4) == [4]
    with pytest.raises(od.MethodError):
        run(m.kernel, 4.0)
    before = compiles()
    assert run(m.kernel, 5) == [5]
    assert compiles() == before


RECURSIVE = """
    import numba
    import overdub as od
    from numba import cuda

    @od.function
    def fact(n: od.Integer):
        if n <= 1:
            return 1
        return n * fact(n - 1)

    @od.jit("i8(i8)", device=True)
    def fib(n):
        if n < 2:
            return n
        return fib(n - 1) + fib(n - 2)

    @cuda.jit(device=True)
    def runaway(x):
        return runaway(x)

    @od.function
    def ping(n: od.Integer):
        return 0 if n <= 0 else pong(n - 1)

    @od.function
    def pong(n: od.Integer):
        return ping(n)

    def kernel(out, n):
        out[0] = fact(n)
        out[1] = fib(n)

    def runs_away(out, n):
        out[0] = runaway(n)

    def ping_pong(out, n):
        out[0] = ping(n)
"""


def test_a_function_calling_itself_compiles_typed_as_numba_types_self_recursion(make_module):
    """Its calls of itself take the return type of its other returns (numba's rule), on both targets; a
    redefinition recompiles the kernel as for any callee."""
    m = make_module(RECURSIVE)
    assert run(m.kernel, 10, n=2, target="cpu") == [3628800, 55]
    ptx = od.code_ptx(m.kernel, od.int64[::1], od.int64, target="cuda")
    assert ptx.count(".func") >= 2 and "call.uni" in ptx  # fact and fib each call themselves
    m.run("""
        @od.function
        def fact(n: od.Integer):
            if n <= 1:
                return 2
            return n * fact(n - 1)
    """)
    assert run(m.kernel, 10, n=2, target="cpu") == [7257600, 55]


def test_a_function_calling_itself_in_a_context_with_state_passes_the_state_to_each_call(make_module):
    """In a context with state, each function takes the state as a hidden first argument: a call of itself
    passes it on, so an overdub reached at every depth counts every call."""
    m = make_module("""
        import overdub as od
        from numba import cuda

        @od.function
        def fact(n: od.Integer):
            if n <= 1:
                return 1
            return n * fact(abs(n) - 1)

        counting = od.Context("counting abs", state=od.int64[::1])

        @counting.overdub(abs)
        def _(x):
            cuda.atomic.add(od.state(), 0, 1)
            return x if x >= 0 else -x

        def kernel(out, n):
            out[0] = fact(abs(n))
    """)
    out, counter = np.zeros(1, np.int64), np.zeros(1, np.int64)
    od.cuda(m.kernel, out, 5, blocks=1, threads=1, context=m.counting, state=counter, target="cpu")
    assert (out[0], counter[0]) == (120, 5)  # abs: once in the kernel, at depths 5, 4, 3 and 2 in fact


def test_recursion_without_a_base_case_or_through_another_function_is_a_compile_error(make_module):
    m = make_module(RECURSIVE)
    with pytest.raises(od.CompileError, match="cannot type infer runaway recursion"):
        run(m.runs_away, 1, target="cpu")
    with pytest.raises(od.CompileError, match=r"calls itself .* through another function") as info:
        run(m.ping_pong, 3, target="cpu")
    assert f"{m.filename}:{m.line_of('return ping(n)')}" in str(info.value)


# --- compile log records and their reasons --------------------------------------------------------------


def _compile_records(caplog):
    return [r for r in caplog.records if r.name == "overdub" and r.levelno == logging.INFO]


def test_first_compile_logs_one_info_record_with_its_reason(make_module, caplog):
    m = make_module(WRITES_ONE)
    caplog.set_level(logging.INFO, logger="overdub")
    run(m.kernel)
    run(m.kernel)
    records = _compile_records(caplog)
    assert len(records) == 1
    assert "first launch of kernel(array(int64, 1d, C))" in records[0].getMessage()


def test_recompile_after_redefinition_logs_the_redefinition_and_its_location(make_module, caplog):
    m = make_module(method_f("1") + CALLS_F)
    run(m.kernel)
    caplog.set_level(logging.INFO, logger="overdub")
    path = m.run(method_f("2"))
    run(m.kernel)
    [record] = _compile_records(caplog)
    line = m.line_of("@od.function", chunk=1)
    assert f"f(x: Integer) redefined at {os.path.basename(path)}:{line}" in record.getMessage()


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
