"""The CUDA kernel idiom on the CPU target (overdub/targets/cpu.py): grid, block and thread indices in 1, 2
and 3 dimensions (callees read the calling thread's), atomics, local arrays, ``print`` once per thread. Barriers, shared memory and
warp operations: tests/test_cpu_sync.py.
"""

import numpy as np

import overdub as od
from helpers import run

# --- grid indexing --------------------------------------------------------------------------------------


def test_grid_1d_indexes_every_thread_of_every_block(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            if i < out.shape[0]:
                out[i] = i + 1
    """)
    assert run(m.kernel, n=13, blocks=3, threads=4, target="cpu") == list(range(1, 13)) + [0]


def test_thread_and_block_indices_match_the_grid_index(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            i = cuda.grid(1)
            out[i] = cuda.blockIdx.x * 100 + cuda.threadIdx.x
    """)
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [b * 100 + t for b in range(3) for t in range(4)]


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
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [i * 101 for i in range(12)]


def test_grid_dimensions_are_visible_to_every_thread(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            if cuda.grid(1) == 0:
                out[0] = cuda.gridsize(1)
                out[1] = cuda.blockDim.x
                out[2] = cuda.gridDim.x
    """)
    assert run(m.kernel, n=3, blocks=3, threads=5, target="cpu") == [15, 5, 3]


def test_grid_2d_covers_a_2d_array(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            x, y = cuda.grid(2)
            if x < out.shape[0] and y < out.shape[1]:
                out[x, y] = x * 100 + y
    """)
    out = np.full((4, 6), -1, dtype=np.int64)
    od.cuda(m.kernel, out, blocks=(2, 3), threads=(2, 2), target="cpu")
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
    assert run(m.kernel, n=24, blocks=(2, 1, 2), threads=(1, 3, 2), target="cpu") == expected


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
    assert run(m.kernel, n=12, blocks=3, threads=4, target="cpu") == [b * 100 + t for b in range(3) for t in range(4)]
    assert run(m.kernel, n=12, blocks=2, threads=6, target="cpu") == [b * 100 + t for b in range(2) for t in range(6)]


# --- atomics and local arrays ---------------------------------------------------------------------------


def test_atomic_add_accumulates_over_the_grid(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            cuda.atomic.add(out, 0, 1)
            cuda.atomic.add(out, 1, cuda.grid(1))
    """)
    assert run(m.kernel, n=2, blocks=5, threads=7, target="cpu") == [35, sum(range(35))]


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
    assert run(m.kernel, n=4, threads=4, target="cpu") == [2 * i + 3 for i in range(4)]


# --- unsupported on the CPU -----------------------------------------------------------------------------


def test_print_in_a_kernel_writes_to_stdout_at_the_end_of_the_launch(make_module, capfd):
    m = make_module("""
        def kernel(x, y, flag):
            print(x, y, flag, "done")
    """)
    capfd.readouterr()
    od.cuda(m.kernel, 3, 2.5, True, target="cpu")
    assert capfd.readouterr().out == "3 2.5 True done\n"


def test_print_runs_once_per_thread(make_module, capfd):
    m = make_module("""
        from numba import cuda

        def kernel():
            print(cuda.grid(1))
    """)
    capfd.readouterr()
    od.cuda(m.kernel, blocks=2, threads=2, target="cpu")
    # each thread prints once; blocks may run on two workers at once, so in either order (as on a GPU)
    assert sorted(capfd.readouterr().out.splitlines(), key=int) == ["0", "1", "2", "3"]


def test_a_kernel_that_does_not_print_prints_nothing(make_module, capfd):
    m = make_module("""
        def kernel(out):
            out[0] = 1
    """)
    capfd.readouterr()
    run(m.kernel, target="cpu")
    assert capfd.readouterr() == ("", "")
