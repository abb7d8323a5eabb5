"""Launching with ``od.cuda`` (overdub/launch.py): each argument typed as itself (array layouts and dtypes,
Python ints beyond int64), one launch function per kernel and argument classes however often an unrelated
global changes, launch statistics.
"""

import numpy as np

import overdub as od
from helpers import WRITES_ONE, compiles, run


def test_each_array_layout_and_dtype_is_read_as_itself(make_module):
    m = make_module("""
        def kernel(out, a):
            for i in range(a.shape[0]):
                out[i] = a[i] * 2
    """)
    base = np.arange(8, dtype=np.float64)
    readonly = np.arange(4, dtype=np.float64)
    readonly.flags.writeable = False
    for a in [
        base[:4],
        base[::2],
        base[1::2],
        readonly,
        np.arange(4, dtype=np.int32),
        np.arange(4, dtype=np.float32) + 0.5,
        base[:4],
    ]:
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


def test_a_module_level_loop_variable_neither_recompiles_nor_piles_up_launch_functions(make_module):
    from overdub.runtime import launch_key, runtime

    m = make_module("""
        N = 1

        def kernel(out):
            out[0] = N
    """)
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    before = compiles()
    for i in range(20):
        m.i = i  # what `for i in ...:` at module level does to the kernel's module
        od.cuda(m.kernel, out)
    assert compiles() == before and out[0] == 1
    assert len(runtime.launches[launch_key(m.kernel, None, None, (out,))]) == 1


def test_stats_count_launches(make_module):
    m = make_module(WRITES_ONE)
    before = od.stats()["launches"]
    run(m.kernel)
    run(m.kernel)
    assert od.stats()["launches"] == before + 2
