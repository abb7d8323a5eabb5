"""Device intrinsics in kernels (overdub/intrinsics.py): pointers (``p[i]``, ``od.unsafe_load`` and
``od.unsafe_store``) and vector loads and stores (``od.vload``, ``od.vstore``, also on the host).
"""

import numpy as np

import overdub as od


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
    assert od.vload(od.pointer(x), 1, 4) == (4, 5, 6, 7)  # the host version
