"""On a GPU: methods added to operators and math functions, context overdubs of a[i] and a[i] = v, class
dunders, and kernels on built-in types computing the same with operators rerouted. Skipped without a GPU."""

import math
import operator

import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import counting_reads
from overdub import compiler, settings

pytestmark = pytest.mark.gpu


def test_operator_and_math_methods_for_pointers_run_on_the_gpu(cupy, make_module):
    m = make_module(
        """
        import math
        import operator
        import overdub as od

        @od.method(operator.add)
        def add(p: od.Ptr[od.float32], q: od.Ptr[od.float32]):
            return od.unsafe_load(p, 0) + od.unsafe_load(q, 0)

        @od.method(math.sin)
        def sin(p: od.Ptr[od.float32]):
            return math.sin(od.unsafe_load(p, 0))

        def kernel(out, p, q):
            out[0] = p + q
            out[1] = math.sin(p)
            out[2] = math.sin(out[0])          # a float: the original
    """,
        prefix="gpu_ptr_methods",
    )
    x, y = cupy.array([0.5], dtype=cupy.float32), cupy.array([2.0], dtype=cupy.float32)
    out = cupy.zeros(3, dtype=cupy.float32)
    od.cuda(m.kernel, out, od.pointer(x), od.pointer(y), target="cuda")
    assert out.get().tolist() == pytest.approx([2.5, math.sin(0.5), math.sin(2.5)], rel=1e-6)


def test_context_overdubs_of_getitem_and_setitem_apply_on_the_gpu(cupy):
    checked = od.Context("gpu_checked")

    @checked.overdub(operator.getitem)
    def _(a: od.Array[od.float32, 1], i: od.Integer):
        return a[i] if i < a.size else np.float32(-1.0)

    @checked.overdub(operator.setitem)
    def _(a: od.Array[od.float32, 1], i: od.Integer, v: od.Float):
        if i < a.size:
            a[i] = v * 2

    def kernel(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i + 2]

    x = cupy.arange(8, dtype=cupy.float32)
    out = cupy.zeros(8, dtype=cupy.float32)
    od.cuda(kernel, out, x, threads=8, target="cuda", context=checked)
    assert out.get().tolist() == [4, 6, 8, 10, 12, 14, -2, -2]


def test_record_dunders_and_reflected_operands_on_the_gpu(make_module):
    m = make_module(
        """
        import operator
        import numpy as np
        import overdub as od
        from numba import cuda
        from numba.np import numpy_support
        from overdub import dunders

        DTYPE = np.dtype([("gpu_re", np.float64), ("gpu_im", np.float64)])
        R = numpy_support.from_dtype(DTYPE)

        class C:
            def __add__(self, other: R):
                return self.gpu_re + other.gpu_re

            def __radd__(self, other: od.Float):
                return other + self.gpu_im

            def __lt__(self, other: R):
                return self.gpu_re < other.gpu_re

        dunders.register(C, R)

        def kernel(out, rs):
            out[0] = rs[0] + rs[1]
            out[1] = 10.0 + rs[0]
            out[2] = rs[0] < rs[1]
    """,
        prefix="gpu_dunders",
    )
    rs = np.zeros(2, dtype=m.DTYPE)
    rs[0], rs[1] = (1.0, 2.0), (3.0, 4.0)
    out = cuda.to_device(np.zeros(3))
    od.cuda(m.kernel, out, cuda.to_device(rs), target="cuda")
    assert out.copy_to_host().tolist() == [4.0, 12.0, 1.0]


def test_kernels_on_built_in_types_compute_the_same_with_operators_rerouted(cupy, monkeypatch):
    def kernel(out, x, t):
        i = cuda.grid(1)
        if i < x.shape[0]:
            v = x[i] ** 2 + t[0] * t[1] - abs(x[i])
            v += 1.0
            if not (v < 0.5) and i in (1, 2, 3):
                v *= 2
            out[i] = v + x.shape[0] * (i % 3) + t[2]

    x = cupy.linspace(-1, 1, 64)
    results = []
    for mode in ("never", "always"):
        compiler.reset()
        monkeypatch.setattr(settings.REROUTE, "process_value", mode)
        out = cupy.zeros(64)
        od.cuda(kernel, out, x, (1.5, 2, 7.0), threads=64, target="cuda")
        results.append(out.get().tolist())
    assert results[0] == results[1]


def test_struct_dunders_differentiate_an_unchanged_function_on_the_gpu(cupy, make_module):
    from test_methods import DUAL

    m = make_module(DUAL, prefix="gpu_dual")
    out = cupy.zeros(4)
    od.cuda(m.kernel, out, 0.5, target="cuda")
    x = 0.5
    assert out.get().tolist() == pytest.approx(
        [3 * x * x + 2 + x**3 + math.sin(x), 6 * x + 3 * x * x + math.cos(x), 1.0, 3 * x * x + 2 + x**3 + math.sin(x)]
    )


def test_an_operator_overdub_counts_array_reads_in_the_launch_state_on_the_gpu(cupy):
    counting = counting_reads("gpu_counting_reads", od.float32)

    def kernel(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i] + x[0]

    x = cupy.arange(64, dtype=cupy.float32)
    out, counts = cupy.zeros(64, dtype=cupy.float32), cupy.zeros(1, dtype=cupy.int64)
    od.cuda(kernel, out, x, threads=64, target="cuda", context=counting, state=counts)
    assert out.get().tolist() == list(range(64)) and counts.get().tolist() == [128]
