"""On a GPU: the seed scenario, invalidation, shared memory, atomics, interop. Skipped without a GPU.

Kernels are built with the ``make_module`` fixture of conftest.py, as in the CPU-target tests: each module's
source is written to a real file (and imports what it uses), so messages name ``file.py:LINE``.
"""

import math
import re
import threading

import numba
import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import CALLS_F_OF_X, NUMBA_CALLEES, ROOT, SEED, TWO_ARGS, in_threads, method_f, run_python, writes_seven
from overdub.targets import cuda as cuda_target

pytestmark = pytest.mark.gpu


def test_seed_scenario_prints_1_then_2_on_the_gpu(cuda_compiler):
    env = {"OVERDUB_TARGET": None, "OVERDUB_CUDA_COMPILER": cuda_compiler}
    result = run_python(ROOT / "examples" / "seed_redefinition.py", env=env)
    assert result.stdout == "1\n2\n"


def test_seed_scenario_in_process_captured_at_fd_level(cupy, capfd, make_module, cuda_compiler):
    m = make_module(SEED, prefix="gpu_seed")
    arr = cupy.ones(1, dtype=np.int64)
    od.cuda(m.kernel, od.pointer(arr), target="cuda")
    m.run(SEED.replace("print(1)", "print(2)").split("def kernel")[0])
    od.cuda(m.kernel, od.pointer(arr), target="cuda")
    od.synchronize(target="cuda")
    assert capfd.readouterr().out == "1\n2\n"
    assert int(arr[0]) == 0


def test_plain_function_callee_redefined(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        def f(x):
            return x + 1

        def kernel(a):
            a[0] = f(a[0])
    """,
        prefix="gpu_plain",
    )
    a = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, a, target="cuda")
    m.run("""
        def f(x):
            return x + 100
    """)
    od.cuda(m.kernel, a, target="cuda")
    assert int(a[0]) == 101


def test_global_constant_rebound(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        N = 3

        def kernel(a):
            a[0] = N
    """,
        prefix="gpu_global",
    )
    a = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, a, target="cuda")
    m.N = 7
    od.cuda(m.kernel, a, target="cuda")
    assert int(a[0]) == 7


def test_chain_with_leaf_redefined(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        import overdub as od

        def c(x):
            return x + 1

        def b(x):
            return c(x) * 2

        @od.function
        def a_(x):
            return b(x)

        def kernel(out):
            out[0] = a_(out[0])
    """,
        prefix="gpu_chain",
    )
    out = cupy.ones(1, dtype=np.int64)
    od.cuda(m.kernel, out, target="cuda")
    assert int(out[0]) == 4
    m.run("""
        def c(x):
            return x + 10
    """)
    od.cuda(m.kernel, out, target="cuda")
    assert int(out[0]) == 28


def test_more_specific_method_and_selective_invalidation(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        import overdub as od

        @od.function
        def f(x: od.Number):
            return 1

        @od.function
        def g(x):
            return 5

        def uses_f(out, x):
            out[0] = f(x)

        def uses_g(out, x):
            out[0] = g(x)
    """,
        prefix="gpu_specific",
    )
    out = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.uses_f, out, 3, target="cuda")
    od.cuda(m.uses_g, out, 3, target="cuda")
    compiles = od.stats()["compiles"]
    m.run(method_f("2"))
    od.cuda(m.uses_g, out, 3, target="cuda")
    assert od.stats()["compiles"] == compiles and int(out[0]) == 5
    od.cuda(m.uses_f, out, 3, target="cuda")
    assert od.stats()["compiles"] == compiles + 1 and int(out[0]) == 2


def test_overdub_added_after_compilation(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        import math

        def kernel(out, x):
            out[0] = math.sin(x)
    """,
        prefix="gpu_negative",
    )
    ctx = od.Context("gpu_late")
    out = cupy.zeros(1, dtype=np.float64)
    od.cuda(m.kernel, out, 0.5, context=ctx, target="cuda")
    assert float(out[0]) == pytest.approx(math.sin(0.5))

    @ctx.overdub(math.sin)
    def _(x: od.Float):
        return 42.0

    od.cuda(m.kernel, out, 0.5, context=ctx, target="cuda")
    assert float(out[0]) == 42.0


def test_grid_indexing_over_several_blocks(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        from numba import cuda

        def kernel(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = i * 2
    """,
        prefix="gpu_grid",
    )
    a = cupy.zeros(1000, dtype=np.int64)
    od.cuda(m.kernel, a, blocks=8, threads=128, target="cuda")
    assert (a.get() == np.arange(1000) * 2).all()


def test_shared_memory_block_reduction(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        import numba
        from numba import cuda

        import overdub as od

        @od.function
        def combine(x: od.Float, y: od.Float):
            return x + y

        def kernel(a, out):
            sm = cuda.shared.array(256, numba.float32)
            t = cuda.threadIdx.x
            i = cuda.grid(1)
            sm[t] = a[i] if i < a.size else numba.float32(0)
            cuda.syncthreads()
            s = 128
            while s > 0:
                if t < s:
                    sm[t] = combine(sm[t], sm[t + s])
                cuda.syncthreads()
                s //= 2
            if t == 0:
                out[cuda.blockIdx.x] = sm[0]
    """,
        prefix="gpu_reduce",
    )
    a = cupy.arange(4096, dtype=np.float32)
    out = cupy.zeros(16, dtype=np.float32)
    od.cuda(m.kernel, a, out, blocks=16, threads=256, target="cuda")
    expected = a.get().reshape(16, 256).sum(axis=1)
    assert np.allclose(out.get(), expected)


def test_dynamic_shared_memory_from_shmem(cupy, make_module):
    m = make_module(
        """
        import numba
        from numba import cuda

        def kernel(out):
            sm = cuda.shared.array(0, numba.int32)
            t = cuda.threadIdx.x
            sm[t] = t
            cuda.syncthreads()
            out[t] = sm[cuda.blockDim.x - 1 - t]
    """,
        prefix="gpu_dynamic_shared",
    )
    out = cupy.zeros(64, dtype=np.int32)
    od.cuda(m.kernel, out, threads=64, shmem=64 * 4, target="cuda")
    assert (out.get() == np.arange(64)[::-1]).all()


def test_atomics_accumulate_across_the_grid(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, 0, 1)
    """,
        prefix="gpu_atomic",
    )
    out = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, blocks=32, threads=128, target="cuda")
    assert int(out[0]) == 32 * 128


def test_pointer_indexing_and_unsafe_load(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        from numba import cuda

        import overdub as od

        def kernel(p, q):
            i = cuda.grid(1)
            q[i] = od.unsafe_load(p, i) * 2
    """,
        prefix="gpu_ptr",
    )
    a = cupy.arange(64, dtype=np.float32)
    b = cupy.zeros(64, dtype=np.float32)
    od.cuda(m.kernel, od.pointer(a), od.pointer(b), threads=64, target="cuda")
    assert (b.get() == np.arange(64) * 2).all()


def test_numba_device_arrays_and_streams(cupy, make_module):
    m = make_module(
        """
        from numba import cuda

        def kernel(a, x):
            a[cuda.grid(1)] += x
    """,
        prefix="gpu_numba_arrays",
    )
    a = cuda.to_device(np.zeros(32, dtype=np.float32))
    od.cuda(m.kernel, a, np.float32(1.5), threads=32, stream=cuda.stream(), target="cuda")
    od.cuda(m.kernel, a, np.float32(1.5), threads=32, stream=cupy.cuda.Stream(), target="cuda")
    od.synchronize(target="cuda")
    assert np.allclose(a.copy_to_host(), 3.0)


def test_torch_tensors_via_cuda_array_interface(make_module):
    torch = pytest.importorskip("torch")
    m = make_module(
        """
        from numba import cuda

        def kernel(a):
            a[cuda.grid(1)] *= 3
    """,
        prefix="gpu_torch",
    )
    t = torch.ones(16, device="cuda", dtype=torch.float32)
    od.cuda(m.kernel, t, threads=16, target="cuda")
    od.synchronize(target="cuda")
    assert t.cpu().tolist() == [3.0] * 16


def test_numpy_array_is_rejected_with_a_clear_message(make_module):
    m = make_module(
        """
        def kernel(a):
            a[0] = 1
    """,
        prefix="gpu_numpy",
    )
    with pytest.raises(TypeError, match="host memory"):
        od.cuda(m.kernel, np.zeros(1), target="cuda")


def test_threads_launching_while_another_redefines(cupy, make_module):
    m = make_module(
        """
        import overdub as od

        @od.function
        def f(x):
            return 1

        def kernel(a):
            a[0] = f(a[0])
    """,
        prefix="gpu_threads",
    )
    errors = []

    def launcher():
        try:
            a = cupy.zeros(1, dtype=np.int64)
            for _ in range(20):
                od.cuda(m.kernel, a, target="cuda")
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=launcher) for _ in range(3)]
    for t in threads:
        t.start()
    for value in range(2, 6):
        m.run(f"""
            @od.function
            def f(x):
                return {value}
        """)
    for t in threads:
        t.join()
    assert not errors
    a = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, a, target="cuda")
    assert int(a[0]) == 5


def test_two_argument_dispatch_and_ambiguity_at_launch(cupy, make_module, cuda_compiler):
    m = make_module(TWO_ARGS, prefix="gpu_ambiguity")
    out = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, 1, 2.5, target="cuda")
    assert int(out[0]) == 1
    with pytest.raises(od.AmbiguityError, match="called at"):
        od.cuda(m.kernel, out, 1, 2, target="cuda")
    m.run("""
        @od.function
        def h(x: od.Integer, y: od.Integer):
            return 4
    """)
    od.cuda(m.kernel, out, 1, 2, target="cuda")
    assert int(out[0]) == 4


def test_method_error_names_function_types_and_candidates_on_the_gpu(cupy, make_module):
    m = make_module(method_f("x") + CALLS_F_OF_X, prefix="gpu_method_error")
    with pytest.raises(od.MethodError) as info:
        od.cuda(m.kernel, cupy.zeros(1, dtype=np.float64), 1.5, target="cuda")
    message = str(info.value)
    assert "no method matching f(float64)" in message and "f(x: Integer)" in message


def test_context_inheritance_and_a_library_extending_cuda(cupy, make_module, cuda_compiler):
    m = make_module(
        """
        import overdub as od

        @od.function
        def h(x):
            return 0

        @od.function
        def lib_fn(x):
            return 0

        def kernel(out, x):
            out[0] = h(x) + lib_fn(x)
    """,
        prefix="gpu_inherit",
    )
    parent = od.Context("gpu_parent")
    child = od.Context("gpu_child", parent=parent)

    @parent.overdub(m.h)
    def _(x: od.Integer):
        return 10

    @od.CUDA.overdub(m.lib_fn)
    def _(x: od.Integer):
        return 100

    out = cupy.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out, 1, context=child, target="cuda")
    assert int(out[0]) == 110
    od.cuda(m.kernel, out, 1, target="cuda")
    assert int(out[0]) == 100


def test_code_sass_on_the_gpu(make_module):
    m = make_module(
        """
        from numba import cuda

        def kernel(a, x):
            a[cuda.grid(1)] = x * 2
    """,
        prefix="gpu_sass",
    )
    sass = od.code_sass(m.kernel, numba.float32[:], od.float32)
    assert "FMUL" in sass or "FADD" in sass


def test_code_sass_of_a_compiled_kernel_on_a_fresh_host_thread(make_module):
    m = make_module("def kernel(a, x):\n    a[0] = x * 3\n", prefix="gpu_sass_thread")
    od.code_ptx(m.kernel, numba.float32[:], od.float32, cc=cuda_target.device_cc())  # compiled here
    found = []
    worker = threading.Thread(target=lambda: found.append(od.code_sass(m.kernel, numba.float32[:], od.float32)))
    worker.start()
    worker.join()
    assert found and "FMUL" in found[0]


def test_vector_loads_and_stores_on_the_gpu(cupy, make_module):
    m = make_module(
        """
        from numba import cuda

        import overdub as od

        def kernel(a, x, y, n4):
            i = cuda.grid(1)
            if i < n4:
                xs = od.vload(x, i, 4)
                ys = od.vload(y, i, 4)
                od.vstore(y, (a * xs[0] + ys[0], a * xs[1] + ys[1], a * xs[2] + ys[2], a * xs[3] + ys[3]), i)
    """,
        prefix="gpu_vector",
    )
    x = cupy.arange(4096, dtype=np.float32)
    y = cupy.ones(4096, dtype=np.float32)
    od.cuda(m.kernel, np.float32(2), od.pointer(x), od.pointer(y), 1024, blocks=4, threads=256, target="cuda")
    assert (y.get() == 2 * np.arange(4096) + 1).all()


def test_libdevice_warp_shuffles_and_numba_callees_run_on_the_gpu(cupy, make_module):
    kernel = """
from numba.cuda import libdevice


def kernel(out, shuffled, x):
    i = cuda.threadIdx.x
    shuffled[i] = cuda.shfl_down_sync(0xffffffff, i, 1)
    if i == 0:
        out[0] = libdevice.sin(x) + twice(x) + plus_one(x)
"""
    m = make_module(NUMBA_CALLEES + kernel, prefix="gpu_delegated")
    out, shuffled = cupy.zeros(1), cupy.zeros(32, dtype=cupy.int32)
    od.cuda(m.kernel, out, shuffled, 0.5, threads=32, target="cuda")
    assert abs(float(out[0]) - (math.sin(0.5) + 1.0 + 1.5)) < 1e-12
    assert shuffled.get().tolist() == list(range(1, 32)) + [31]


def test_a_closure_capturing_data_compiles_once_and_reads_each_value_on_the_gpu(cupy):
    def make(k):
        def kernel(out):
            out[0] = k

        return kernel

    before = od.stats()["compiles"]
    out = cupy.zeros(1, dtype=cupy.int64)
    for k in range(5):
        od.cuda(make(k), out, target="cuda")
        assert int(out[0]) == k
    assert od.stats()["compiles"] == before + 1


def test_xoroshiro_random_states_and_record_arrays_on_the_gpu(cupy, make_module):
    from numba.cuda.random import create_xoroshiro128p_states

    m = make_module(
        """
        from numba import cuda
        from numba.cuda.random import xoroshiro128p_uniform_float32

        def draw(states, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = xoroshiro128p_uniform_float32(states, i)

        def read(points, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = points[i].x * points[i].n
    """,
        prefix="gpu_records",
    )
    states = create_xoroshiro128p_states(256, seed=7)
    out = cupy.zeros(256, dtype=cupy.float32)
    od.cuda(m.draw, states, out, threads=128, blocks=2, target="cuda")
    values = out.get()
    assert ((values >= 0) & (values < 1)).all() and len(set(values.tolist())) > 200
    record = np.dtype([("x", np.float32), ("n", np.int64)], align=True)
    host = np.zeros(4, dtype=record)
    host["x"], host["n"] = [0.5, 1.5, 2.5, 3.5], [2, 2, 2, 2]
    points = cuda.to_device(host)
    result = cupy.zeros(4, dtype=cupy.float64)
    od.cuda(m.read, points, result, threads=4, target="cuda")
    assert result.get().tolist() == [1.0, 3.0, 5.0, 7.0]


def test_grid_sync_launches_cooperatively_and_a_too_large_grid_is_refused(cupy, make_module):
    m = make_module(
        """
        from numba import cuda

        def rotate(a, b):
            g = cuda.cg.this_grid()
            i = cuda.grid(1)
            a[i] = i
            g.sync()                       # every block's writes are visible after this
            b[i] = a[(i + 1) % a.size]
    """,
        prefix="gpu_grid_sync",
    )
    n = 64 * 128
    a, b = cupy.zeros(n, dtype=cupy.int64), cupy.zeros(n, dtype=cupy.int64)
    od.cuda(m.rotate, a, b, threads=128, blocks=64, target="cuda")
    assert b.get().tolist() == [(i + 1) % n for i in range(n)]
    with pytest.raises(ValueError, match="resident at once"):
        od.cuda(
            m.rotate,
            cupy.zeros(10**7, dtype=cupy.int64),
            cupy.zeros(10**7, dtype=cupy.int64),
            threads=128,
            blocks=10**7 // 128,
            target="cuda",
        )


def test_od_jit_copies_host_arrays_to_the_device_and_back_as_numba_cuda_does():
    @od.jit
    def double(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] *= 2

    host = np.arange(100, dtype=np.float64)
    double[4, 32](host)
    assert host.tolist() == [2.0 * i for i in range(100)]


def test_od_jit_passes_a_record_by_its_device_copy_and_copies_it_back():
    record = np.dtype([("x", np.float64), ("n", np.int32)], align=True)
    host = np.zeros(1, dtype=record)
    host[0] = (1.5, 4)

    @od.jit
    def scale(point):
        point.x = point.x * point.n

    scale[1, 1](host[0])
    assert host[0]["x"] == 6.0


def test_forall_sizes_blocks_by_occupancy_and_covers_every_task(cupy):
    fill = od.jit(writes_seven)
    out = cupy.zeros(100_000, dtype=cupy.int64)
    fill.forall(out.size)(out)
    assert int((out == 7).sum()) == out.size


def test_compile_options_on_the_gpu(cupy, make_module, tmp_path):
    """debug: an exception raised in a kernel reaches the host naming the thread, block and line;
    max_registers limits the registers; link links a PTX file's device function."""
    m = make_module(
        """
        from numba import cuda

        def fail_on_5(a):
            i = cuda.grid(1)
            if i == 5:
                raise ValueError("five")
            a[i] = i

        def busy(out, x):               # twelve live doubles: more than 32 registers unless limited
            i = cuda.grid(1)
            n = x.size
            a0, a1, a2, a3, a4, a5 = x[i % n], x[(i + 1) % n], x[(i + 2) % n], x[(i + 3) % n], x[(i + 4) % n], x[(i + 5) % n]
            b0, b1, b2, b3, b4, b5 = a5 * 1.5, a4 * 2.5, a3 * 3.5, a2 * 4.5, a1 * 5.5, a0 * 6.5
            for k in range(32):
                a0, a1, a2, a3, a4, a5 = a0 * b1 + a5, a1 * b2 + a0, a2 * b3 + a1, a3 * b4 + a2, a4 * b5 + a3, a5 * b0 + a4
                b0, b1, b2, b3, b4, b5 = b0 + a1, b1 + a2, b2 + a3, b3 + a4, b4 + a5, b5 + a0
            out[i] = a0 + a1 + a2 + a3 + a4 + a5 + b0 + b1 + b2 + b3 + b4 + b5
    """,
        prefix="gpu_options",
    )
    a = cupy.zeros(8, dtype=np.int64)
    with pytest.raises(ValueError) as info:
        od.cuda(m.fail_on_5, a, threads=8, target="cuda", debug=True)
    assert "five" in str(info.value) and "tid=[5, 0, 0] ctaid=[0, 0, 0]" in str(info.value)  # numba-cuda's words
    assert f"{m.filename}, line {m.line_of('raise ValueError')}" in str(info.value)  # file F, line N
    od.cuda(m.fail_on_5, cupy.zeros(4, dtype=np.int64), threads=4, target="cuda", debug=True)  # no error raised

    from cuda.bindings import driver

    def registers(kernel, *args):
        kernel[2, 128](*args)
        err, regs = driver.cuFuncGetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, kernel._compiled(args).launcher._function()
        )
        assert not err
        return regs

    x = cupy.arange(256, dtype=np.float64) / 256
    out, limited_out = cupy.zeros(256), cupy.zeros(256)
    assert registers(od.jit(m.busy), out, x) > 32 >= registers(od.jit(max_registers=32)(m.busy), limited_out, x)
    assert cupy.allclose(out, limited_out)

    source = tmp_path / "triple.cu"  # numba-cuda's ABI for a declared device function
    source.write_text('extern "C" __device__ int triple(int* out, int x) { *out = 3 * x; return 0; }')
    triple = cuda.declare_device("triple", "int32(int32)")

    def use_triple(out):
        i = cuda.grid(1)
        out[i] = triple(i)

    linked = od.jit(link=[str(source)])(use_triple)
    result = cupy.zeros(4, dtype=np.int32)
    linked[1, 4](result)
    assert result.tolist() == [0, 3, 6, 9]


def test_tuple_arguments_on_the_gpu(cupy):
    def area(out, shape, pair):
        out[0] = shape[0] * shape[1] + pair[0] + pair[1][0]

    out = cupy.zeros(1)
    od.cuda(area, out, (3, 4), (0.5, (np.float32(2),)), target="cuda")
    od.cuda(area, out, (3, 5), (0.25, (np.float32(1),)), target="cuda")
    assert out.get()[0] == 16.25


def test_a_kernel_reshaping_an_array_links_and_runs_on_the_gpu(cupy):
    def flat(out, a):
        b = a.reshape(6)
        for i in range(6):
            out[i] = b[i]

    a = cupy.arange(6.0).reshape(2, 3)
    out = cupy.zeros(6)
    od.cuda(flat, out, a, target="cuda")
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


# --- host threads: a thread that never used the GPU launches, compiles, loads and synchronizes (issue 19) -----

THREAD_KERNELS = """
from numba import cuda

def first(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = 1

def raises_at_70(out):
    i = cuda.grid(1)
    if i == 70:
        raise ValueError("seventy")
    if i < out.shape[0]:
        out[i] = 1
""" + "".join(
    f"""
def kernel{n}(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = {n} * i
"""
    for n in range(4)
)


def _on_a_new_thread(work):
    """Run ``work()`` on a host thread of its own; raise here what it raised."""
    errors = in_threads(lambda _: work(), [None])
    if errors:
        raise errors[0]


@pytest.fixture(params=["cache off", "cold cache"])
def cold(request, monkeypatch):
    """Every kernel must be compiled: the disk cache off, or empty (conftest gives each test its own)."""
    if request.param == "cache off":
        monkeypatch.setenv("OVERDUB_CACHE", "0")


@pytest.fixture
def thread_kernels(cupy, make_module):
    """The kernels above, and the GPU used by the main thread first (a launch of ``first``)."""
    m = make_module(THREAD_KERNELS, prefix="gpu_host_threads")
    od.cuda(m.first, cupy.zeros(64, dtype=np.int64), threads=64, target="cuda")
    od.synchronize(target="cuda")
    return m


def test_a_new_host_thread_launches_a_kernel_it_must_compile(cupy, thread_kernels, cold):
    out = cupy.zeros(64, dtype=np.int64)
    before = od.stats()["compiles"]
    _on_a_new_thread(lambda: od.cuda(thread_kernels.kernel1, out, threads=64, target="cuda"))
    assert od.stats()["compiles"] == before + 1
    assert out.get().tolist() == list(range(64))


def test_a_new_host_thread_allocates_compiles_launches_and_synchronizes(cupy, thread_kernels, cold):
    results = []

    def work():
        out = cupy.zeros(64, dtype=np.int64)
        od.cuda(thread_kernels.kernel2, out, threads=64, target="cuda")
        od.synchronize(target="cuda")
        results.append(out.get().tolist())

    _on_a_new_thread(work)
    assert results == [[2 * i for i in range(64)]]


def test_several_threads_compile_different_kernels_at_once(cupy, thread_kernels, cold):
    outs = [cupy.zeros(64, dtype=np.int64) for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(n):
        barrier.wait()
        od.cuda(getattr(thread_kernels, f"kernel{n}"), outs[n], threads=64, target="cuda")
        od.synchronize(target="cuda")

    assert in_threads(work, range(4)) == []
    assert [out.get().tolist() for out in outs] == [[n * i for i in range(64)] for n in range(4)]


def test_a_thread_that_never_used_the_gpu_launches_from_the_launch_table(cupy, thread_kernels):
    out = cupy.zeros(64, dtype=np.int64)
    od.cuda(thread_kernels.kernel3, out, threads=64, target="cuda")  # compiled, loaded, in the launch table
    od.synchronize(target="cuda")
    out[:] = 0
    before = od.stats()["compiles"]

    def work():
        for _ in range(3):
            od.cuda(thread_kernels.kernel3, out, threads=64, target="cuda")

    _on_a_new_thread(work)
    assert out.get().tolist() == [3 * i for i in range(64)] and od.stats()["compiles"] == before


def test_synchronize_from_a_thread_that_never_used_the_gpu(thread_kernels):
    _on_a_new_thread(lambda: od.synchronize(target="cuda"))


def test_a_debug_kernel_raises_on_the_new_thread_that_launched_it(cupy, thread_kernels, cold):
    out = cupy.zeros(64, dtype=np.int64)
    with pytest.raises(ValueError, match=r"tid=\[6, 0, 0\] ctaid=\[1, 0, 0\]: seventy"):  # numba-cuda's form
        _on_a_new_thread(
            lambda: od.cuda(thread_kernels.raises_at_70, out, threads=64, blocks=2, target="cuda", debug=True)
        )


def test_od_jit_copies_host_arrays_on_a_new_thread(thread_kernels, cold):
    kernel = od.jit(thread_kernels.kernel1)
    host = np.zeros(64, dtype=np.int64)
    _on_a_new_thread(lambda: kernel[1, 64](host))
    assert host.tolist() == list(range(64))


def test_a_thread_pool_launches_many_kernels_with_a_cold_cache(cupy, thread_kernels, cold):
    from concurrent.futures import ThreadPoolExecutor

    outs = [cupy.zeros(64, dtype=np.int64) for _ in range(8)]

    def work(n):
        od.cuda(getattr(thread_kernels, f"kernel{n % 4}"), outs[n], threads=64, target="cuda")
        od.synchronize(target="cuda")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(8)))
    assert [out.get().tolist() for out in outs] == [[(n % 4) * i for i in range(64)] for n in range(8)]


# --- every launch check before any compile, on the CUDA target (issue 19) -------------------------------------

GPU_BAD_CONFIGURATIONS = [
    (dict(threads=2.0), ValueError, r"threads must be a positive integer .* not 2\.0"),
    (dict(threads=2048), ValueError, r"threads=2048 exceeds CUDA's limits"),
    (dict(shmem=2.0), ValueError, r"shmem must be a non-negative integer .* not 2\.0"),
    (dict(shmem=-8), ValueError, r"shmem must be a non-negative integer .* not -8"),
    (dict(shmem=1 << 20), ValueError, r"shmem=1048576 exceeds CUDA's limit of 49152 bytes"),
    (dict(stream="default"), TypeError, r"stream= takes a cupy, numba or cuda.core stream, not str"),
]


@pytest.mark.parametrize("cache", ["off", "cold", "warm"])
@pytest.mark.parametrize("config, error, message", GPU_BAD_CONFIGURATIONS)
def test_a_bad_launch_configuration_is_refused_before_anything_compiles_on_the_gpu(
    cupy, make_module, config, error, message, cache, monkeypatch
):
    from overdub.runtime import runtime

    if cache == "off":
        monkeypatch.setenv("OVERDUB_CACHE", "0")
    m = make_module(THREAD_KERNELS, prefix="gpu_checks_first")
    out = cupy.zeros(64, dtype=np.int64)
    if cache == "warm":  # in the disk cache, nothing in memory: a new process
        od.cuda(m.kernel1, out, threads=64, target="cuda")
        runtime.reset()
        out[:] = 0
    before = od.stats()
    with pytest.raises(error, match=message):
        od.cuda(m.kernel1, out, target="cuda", **({"threads": 64} | config))
    after = od.stats()
    assert [after[k] - before[k] for k in ("compiles", "disk_hits", "disk_misses", "launches")] == [0, 0, 0, 0]
    od.cuda(m.kernel1, out, threads=64, target="cuda")
    with pytest.raises(error, match=message):  # and the same refusal from the launch table (the C launcher)
        od.cuda(m.kernel1, out, target="cuda", **({"threads": 64} | config))
    assert out.get().tolist() == list(range(64))


def test_a_host_array_is_refused_before_anything_compiles_on_the_gpu(make_module):
    m = make_module(THREAD_KERNELS, prefix="gpu_host_array_first")
    before = od.stats()["compiles"]
    with pytest.raises(TypeError, match="lives in host memory"):
        od.cuda(m.kernel1, np.zeros(64, dtype=np.int64), threads=64, target="cuda")
    assert od.stats()["compiles"] == before


def test_numpy_integer_shmem_launches_through_the_launch_table(cupy, make_module):
    m = make_module(THREAD_KERNELS, prefix="gpu_numpy_shmem")
    out = cupy.zeros(64, dtype=np.int64)
    for shmem in (0, np.int64(256), np.uint32(0), 256, np.int32(49152)):
        od.cuda(m.kernel1, out, threads=64, shmem=shmem, target="cuda")
    assert out.get().tolist() == list(range(64))


def test_cupy_arrays_are_read_in_place_by_the_native_launch_and_every_layout_is_right(cupy, make_module):
    """The native launch functions read a cupy array's fields where this cupy keeps them (found once per
    process: overdub/targets/cuda/arraylayout.py): C, F and non-contiguous arrays, views, an array reshaped in place
    and an empty one all give the kernel their own shape, strides and data."""
    from overdub import _fastlaunch
    from overdub.targets.cuda import arraylayout

    m = make_module(
        """
        from numba import cuda

        def total(out, a):
            if cuda.grid(1) == 0:
                s = 0.0
                for i in range(a.shape[0]):
                    for j in range(a.shape[1]):
                        s += a[i, j] * (i + 1) * (j + 10)
                out[0] = s
        """
    )
    out = cupy.zeros(1)
    base = cupy.arange(48, dtype=cupy.float64).reshape(6, 8)
    arrays = [base, cupy.asfortranarray(base), base[::2, 1::3], base.T, base[:0], base.reshape(8, 6)]
    before = _fastlaunch.launch_count()
    for a in arrays * 2:  # the second round: from the launch table, natively
        od.cuda(m.total, out, a)
        host = cupy.asnumpy(a)
        weights = np.outer(np.arange(1, host.shape[0] + 1), np.arange(10, host.shape[1] + 10))
        assert out.get()[0] == (host * weights).sum(), a.shape
    assert arraylayout.install(_fastlaunch), "this cupy's layout is found"
    assert _fastlaunch.launch_count() - before >= len(arrays)
    reshaped = base.copy()
    reshaped.shape = (8, 6)  # in place: the same object, new shape and strides
    od.cuda(m.total, out, reshaped)
    weights = np.outer(np.arange(1, 9), np.arange(10, 16))
    assert out.get()[0] == (cupy.asnumpy(reshaped) * weights).sum()


def test_numba_cudas_host_memory_rules_in_the_drop_in():
    """A host array is copied for the launch with numba-cuda's warning; mapped and managed arrays (numpy arrays
    the GPU reads in place) are passed as they are, to od.jit's kernels and to od.cuda, without one."""
    import warnings

    from numba.cuda.core.errors import NumbaPerformanceWarning

    @od.jit
    def add_one(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1.0

    host = np.zeros(128)
    with pytest.warns(NumbaPerformanceWarning, match="Host array used in CUDA kernel will incur copy overhead"):
        add_one[1, 128](host)
    assert host.tolist() == [1.0] * 128
    for made in (cuda.mapped_array, cuda.managed_array):
        in_place = made(128, dtype=np.float64)
        in_place[:] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("error", NumbaPerformanceWarning)
            add_one[128, 1](in_place)
            od.cuda(add_one, in_place, blocks=1, threads=128)
        cuda.synchronize()
        assert in_place.tolist() == [2.0] * 128, made.__name__


def test_enum_members_datetimes_and_tuples_of_host_arrays_as_numba_cuda_takes_them():
    import enum

    class Level(enum.IntEnum):
        LOW = 1
        HIGH = 9

    @od.jit
    def kernel(out, level, stamps, when, pair):
        out[0] = level.value
        stamps[0] = when
        out[2] = pair[0][1] + pair[1][0]
        pair[1][0] = -1.0

    out, stamps, pair = np.zeros(3), np.zeros(1, "datetime64[D]"), (np.arange(3.0), np.full(2, 10.0))
    kernel[1, 1](out, Level.HIGH, stamps, np.datetime64("2020-01-03"), pair)
    assert out.tolist() == [9.0, 0.0, 11.0] and pair[1][0] == -1.0
    assert stamps[0] == np.datetime64("2020-01-03")


def test_a_kernels_resource_use_as_numba_cuda_reports_it():
    @od.jit("void(float32[::1], int64)")
    def specialized(x, n):
        tile = cuda.shared.array(64, numba.float32)
        i = cuda.grid(1)
        if i < n:
            tile[i % 64] = x[i]
            x[i] = 3.14 * math.sin(tile[i % 64])

    assert specialized.get_regs_per_thread() > 0 and specialized.get_shared_mem_per_block() == 64 * 4
    assert 0 < specialized.get_max_threads_per_block() <= 1024 and specialized.get_local_mem_per_thread() >= 0
    assert specialized.get_const_mem_size() >= 0

    @od.jit
    def generic(x, n):
        i = cuda.grid(1)
        if i < n:
            x[i] = 3.14 * math.sin(x[i])

    x32, x64 = cuda.to_device(np.zeros(10, np.float32)), cuda.to_device(np.zeros(10))
    generic[1, 10](x32, 10)
    generic[1, 10](x64, 10)
    f32, f64 = numba.void(numba.float32[::1], numba.int64), numba.void(numba.float64[::1], numba.int64)
    every = generic.get_regs_per_thread()
    assert every[f32.args] == generic.get_regs_per_thread(f32) > 0 and every[f64.args] > 0


def test_launch_bounds_and_the_shared_memory_carveout_as_numba_cuda_has_them():
    from cuda.core._utils.cuda_utils import CUDAError

    @od.jit(launch_bounds=(128, 2), shared_memory_carveout="MaxShared")
    def bounded(out):
        out[cuda.grid(1)] = 1.0

    out = cuda.to_device(np.zeros(256))
    bounded[1, 128](out)
    with pytest.raises(CUDAError, match="CUDA_ERROR_INVALID_VALUE"):  # numba-cuda's error, programs catch it
        bounded[1, 256](out)
    assert out.copy_to_host().sum() == 128.0
    assert re.search(r"\.maxntid\s+128", bounded.inspect_asm(bounded.signatures[0]))
    assert re.search(r"\.minnctapersm\s+2", bounded.inspect_asm(bounded.signatures[0]))


def test_cuda_in_out_and_inout_copy_as_numba_cuda_says():
    @od.jit
    def set_three(a):
        a[0] = 3

    for hint, kept in ((cuda.In, 0), (cuda.InOut, 3), (cuda.Out, 3)):
        host = np.zeros(1, dtype=np.int64)
        set_three[1, 1](hint(host))
        assert host[0] == kept, hint.__name__


def test_a_closure_capturing_a_host_array_runs_with_its_current_contents():
    values = np.array([1.5, 2.5])

    @od.jit
    def kernel(out):
        for i in range(len(out)):
            out[i] = values[i] * 2

    out = cuda.to_device(np.zeros(2))
    kernel[1, 1](out)
    assert out.copy_to_host().tolist() == [3.0, 5.0]
    values[0] = 10.0  # in place: the constant's contents are an edge of the kernel
    kernel[1, 1](out)
    assert out.copy_to_host().tolist() == [20.0, 5.0]
