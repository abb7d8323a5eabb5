"""What a kernel's names can be (overdub/rewrite.py): plain functions called with keyword and default
arguments, builtins such as ``len``, kernels defined in closures (free variables), and another module's
globals read through the module (module proxies) -- the last two seen afresh after a redefinition or rebinding.
"""

import faulthandler
import gc

import numpy as np
import pytest

import overdub as od
from helpers import run


def test_plain_function_callee_with_keyword_and_default_arguments(make_module):
    m = make_module("""
        def scaled(x, scale=2):
            return x * scale

        def kernel(out):
            out[0] = scaled(3)
            out[1] = scaled(3, scale=5)
    """)
    assert run(m.kernel, n=2) == [6, 15]


def test_len_of_an_array_works_in_a_kernel(make_module):
    m = make_module("""
        def kernel(out):
            out[0] = len(out)
    """)
    assert run(m.kernel, n=3) == [3, 0, 0]


def test_kernel_defined_in_a_closure_sees_a_redefined_generic_function():
    f = od.GenericFunction("f_closure")
    f.define(lambda x: 1, sig=(od.Integer,))

    def kernel(out):
        out[0] = f(0)

    assert run(kernel) == [1]
    f.define(lambda x: 2, sig=(od.Integer,))
    assert run(kernel) == [2]


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


def test_a_kernel_inlining_an_overload_compiles_once_though_numba_drops_the_implementation():
    """numba makes an ``@overload``'s ``impl`` anew at each typing and drops it once inlined
    (``inline="always"``, numba-cuda's test_numba_interop): its death was taken for a change of its code, and
    each launch compiled the kernel again, without end (the GPU's compat run timed out there)."""
    from numba.extending import overload

    def get_42():
        raise NotImplementedError

    @overload(get_42, inline="always")
    def ol_get_42():
        def impl():
            return 42

        return impl

    def kernel(a):
        a[0] = get_42()

    a = np.zeros(1, dtype=np.float32)
    compiles = od.stats()["compiles"]
    faulthandler.dump_traceback_later(300, exit=True)  # the regression is a launch that never returns
    try:
        for _ in range(3):
            gc.collect()
            od.cuda(kernel, a, target="cpu")
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert a[0] == 42 and od.stats()["compiles"] == compiles + 1


def test_an_overloads_keyword_and_default_arguments_fold_with_its_own_signature_not_its_stubs():
    """An ``@overload``'s stub often takes no parameters (``def f(): pass``); the keywords of a call fold with
    the overload's signature, as numba-cuda folds them (its test_overload): folded with the stub's, the call
    failed to type ("Cannot bind ... to signature '()'")."""
    from numba import types
    from numba.extending import overload

    def stored():
        pass

    @overload(stored)
    def ol_stored(out, x, y=5, z=6):
        def impl(out, x, y=5, z=6):
            out[0], out[1] = x + y, z

        return impl

    def kernel(a, b, out):
        stored(out, a, z=b)

    out = np.zeros(2, dtype=np.int64)
    od.cuda(kernel, 1, 2, out, target="cpu")
    assert tuple(out) == (6, 2)
    assert ".entry" in od.code_ptx(kernel, types.int64, types.int64, types.int64[::1])


def test_an_overload_whose_implementation_differs_from_its_typing_reports_numbas_check():
    """numba checks an ``@overload``'s implementation against its typing function's signature where the
    keywords fold (numba-cuda's test_extending): a ``*args`` typing function, with the call's keywords left to
    numba, ends the compile with numba's TypingError saying so."""
    from numba.core.errors import TypingError
    from numba.extending import overload

    def stub(a, kw=None):
        pass

    def typing(a, *star_args_token, kw=None, kw1=12):
        def impl(a, b, f, kw=None, kw1=12):
            return 1

        return impl

    overload(stub)(typing)

    def kernel(out, a, b):
        out[0] = stub(a, b, 9, kw=11)

    with pytest.raises(TypingError, match=r"VAR_POSITIONAL \(e.g. \*args\) argument kind"):
        od.cuda(kernel, np.zeros(1, dtype=np.int64), 1, 5, target="cpu")


@pytest.mark.parametrize("where", ["numba", "numba.cuda.misc.special"])
def test_literal_unroll_over_a_tuple_of_arrays_of_several_ranks_on_both_targets(where):
    """numba's unrolling pass finds ``literal_unroll`` by identity: a context's proxy in its place left the
    loop over a heterogeneous tuple unrolled by nothing (numba-cuda's test_array_reductions). numba's and
    numba-cuda's own ``literal_unroll`` each compile on both targets."""
    import importlib

    from numba import types

    literal_unroll = importlib.import_module(where).literal_unroll
    cases = (np.float64([1.0, 0.0]), np.float64([[1.0, 1.5], [2.0, 3.0]]))

    def kernel(out):
        i = 0
        for case in literal_unroll(cases):
            out[i] = case.ndim * 10 + case.size
            i += 1  # noqa: SIM113  (literal_unroll unrolls a plain loop, not enumerate)

    out = np.zeros(2)
    od.cuda(kernel, out, target="cpu")
    assert out.tolist() == [12.0, 24.0]
    assert ".visible .entry" in od.code_ptx(kernel, types.float64[::1])
