"""The synchronizing kernels of sync_kernels.py on both targets: the CPU target's result must be the GPU's.

Each case launches one kernel with the same inputs on the CPU target (numpy arrays) and on the GPU (cupy
copies), then compares every array argument. Skipped without a GPU (marked ``gpu``); without one, CI still
compiles each kernel to PTX.
"""

import numba
import numpy as np
import pytest

import overdub as od
import sync_kernels as k


def _rng(seed):
    return np.random.default_rng(seed)


def _matmul_args():
    A, B = _rng(2).random((48, 48), dtype=np.float32), _rng(3).random((48, 48), dtype=np.float32)
    return A, B, np.zeros((48, 48), np.float32)


CASES = {
    "tree_sum": (k.tree_sum, lambda: (_rng(1).random(1000), np.zeros(8)), dict(blocks=8, threads=k.REDUCE_THREADS)),
    "fast_matmul": (k.docs_fast_matmul, _matmul_args, dict(blocks=(3, 3), threads=(k.TPB, k.TPB))),
    "rotate": (
        k.rotate,
        lambda: (np.arange(192, dtype=np.int64), np.zeros(192, np.int64), 5),
        dict(blocks=3, threads=64),
    ),
    "dynamic_shared": (
        k.reverse_dynamic,
        lambda: (np.arange(96.0), np.zeros(96)),
        dict(blocks=3, threads=32, shmem=32 * 8),
    ),
    "grid_sync": (k.two_phase, lambda: (np.zeros(512, np.int64), np.zeros(512, np.int64)), dict(blocks=8, threads=64)),
    "warp_sum": (
        k.warp_sum,
        lambda: (np.arange(512, dtype=np.int64), np.zeros(1, np.int64)),
        dict(blocks=4, threads=128),
    ),
    "warp_ops": (
        k.warp_ops,
        lambda: (np.arange(64, dtype=np.int64), np.zeros((64, 6), np.int64)),
        dict(blocks=1, threads=64),
    ),
    "histogram": (
        k.histogram,
        lambda: (_rng(4).integers(0, 1000, 200_000), np.zeros(13, np.int64)),
        dict(blocks=1563, threads=128),
    ),
    "atomic_extremes": (
        k.atomic_extremes,
        lambda: (
            _rng(5).integers(-(10**9), 10**9, 100_000),
            np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]),
        ),
        dict(blocks=1563, threads=64),
    ),
    "barrier_votes": (
        k.barrier_votes,
        lambda: (np.r_[np.ones(70), np.zeros(122)].astype(np.int64), np.zeros((3, 3), np.int64)),
        dict(blocks=3, threads=64),
    ),
    "docs_array_sum": (
        k.docs_array_sum,
        lambda: (np.arange(k.nelem, dtype=np.int32),),
        dict(blocks=1, threads=k.nelem),
    ),
    "docs_sequential_rows": (
        k.docs_sequential_rows,
        lambda: (np.zeros((16, 128), np.int32),),
        dict(blocks=4, threads=32),
    ),
    "docs_warp_reduce": (
        k.docs_warp_reduce,
        lambda: (np.arange(256, dtype=np.int64), np.zeros(8, np.int64)),
        dict(blocks=2, threads=128),
    ),
    "scan_in_callee": (
        k.scan_in_callee,
        lambda: (np.arange(128, dtype=np.int64) % 7, np.zeros(128, np.int64)),
        dict(blocks=2, threads=64),
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cpu_target_computes_what_the_gpu_computes(cupy, name):
    kernel, make_args, launch = CASES[name]
    on_cpu = make_args()
    on_gpu = tuple(cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in make_args())
    od.cuda(kernel, *on_cpu, target="cpu", **launch)
    od.cuda(kernel, *on_gpu, target="cuda", **launch)
    od.synchronize("cuda")
    for cpu_value, gpu_value in zip(on_cpu, on_gpu):
        if isinstance(cpu_value, np.ndarray):
            np.testing.assert_allclose(cpu_value, cupy.asnumpy(gpu_value), rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_kernel_compiles_to_ptx_for_the_gpu(name):
    kernel, make_args, _ = CASES[name]
    argtypes = [numba.typeof(a) for a in make_args()]
    ptx = od.code_ptx(kernel.py_func if hasattr(kernel, "py_func") else kernel, *argtypes)
    assert ".visible .entry" in ptx
    if name in ("tree_sum", "rotate", "fast_matmul"):
        assert "bar.sync" in ptx or "barrier.sync" in ptx
