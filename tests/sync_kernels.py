"""Kernels that synchronize threads: barriers, shared memory, warp operations, grid groups, atomics.

Written as numba-cuda kernels are, so that tests/test_cpu_sync.py runs them on the CPU target and
tests/test_gpu.py runs the same kernels on the GPU and compares. The ``docs_*`` kernels are numba-cuda's
documentation examples, copied unchanged (only their launch lines differ).
"""

import numba
import numpy as np
from numba import cuda, float32, int32

import overdub as od

TPB = 16  # threads per block edge in the tiled matmul
REDUCE_THREADS = 128


def tree_sum(a, out):
    """Each block sums its slice of ``a`` in shared memory, halving the active threads at each step."""
    s = cuda.shared.array(REDUCE_THREADS, numba.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = a[i] if i < a.size else 0.0
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


def rotate(a, out, rounds):
    """Each round, every thread reads its right neighbour's value (written by another thread) and, after a
    barrier, writes its own: data flows between threads through shared memory in a loop with barriers."""
    s = cuda.shared.array(shape=64, dtype=np.int64)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    s[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    for _ in range(rounds):
        v = s[(t + 1) % n]
        cuda.syncthreads()
        s[t] = v
        cuda.syncthreads()
    out[cuda.grid(1)] = s[t]


def reverse_dynamic(a, out):
    """Reverses each block's slice through dynamic shared memory (``shmem=`` bytes); adds the array's size."""
    s = cuda.shared.array(0, dtype=numba.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = a[i]
    cuda.syncthreads()
    out[i] = s[cuda.blockDim.x - 1 - t] + s.size


def two_phase(a, b):
    """Phase 1 writes a[i]; after a grid sync, phase 2 reads another block's element."""
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    a[i] = i * 3
    g.sync()
    n = cuda.gridsize(1)
    b[i] = a[(i + cuda.blockDim.x) % n]


def warp_sum(a, out):
    """Warp-shuffle reduction: each warp sums 32 values with shfl_down_sync; lane 0 adds it to out[0]."""
    i = cuda.grid(1)
    v = a[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.threadIdx.x % 32 == 0:
        cuda.atomic.add(out, 0, v)


def warp_ops(a, out):
    """Every warp function, one column each: broadcast, up, xor-butterfly sum, votes, ballot."""
    t = cuda.threadIdx.x
    v = a[t]
    out[t, 0] = cuda.shfl_sync(0xFFFFFFFF, v, 3)
    out[t, 1] = cuda.shfl_up_sync(0xFFFFFFFF, v, 1)
    total = v
    for k in (1, 2, 4, 8, 16):
        total += cuda.shfl_xor_sync(0xFFFFFFFF, total, k)
    out[t, 2] = total
    out[t, 3] = cuda.all_sync(0xFFFFFFFF, v >= 0)
    out[t, 4] = cuda.any_sync(0xFFFFFFFF, v == 5)
    out[t, 5] = cuda.ballot_sync(0xFFFFFFFF, v % 2 == 0)
    cuda.syncwarp()


def histogram(a, out):
    """Exact integer atomics from every block: a histogram of a % out.size, each element counted 50 times (so
    that blocks on different cores overlap in time)."""
    i = cuda.grid(1)
    if i < a.size:
        for _ in range(50):
            cuda.atomic.add(out, a[i] % out.size, 1)


def atomic_extremes(a, out):
    """atomic.max / min into out[0] / out[1], and a count of the elements above 0 by compare-and-swap."""
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.max(out, 0, a[i])
        cuda.atomic.min(out, 1, a[i])
        if a[i] > 0:
            old = out[2]
            while True:
                seen = cuda.atomic.cas(out, 2, old, old + 1)
                if seen == old:
                    break
                old = seen


def barrier_votes(a, out):
    """syncthreads_count / _and / _or over the block."""
    positive = numba.int32(a[cuda.grid(1)] > 0)
    out[cuda.blockIdx.x, 0] = cuda.syncthreads_count(positive)
    out[cuda.blockIdx.x, 1] = cuda.syncthreads_and(positive)
    out[cuda.blockIdx.x, 2] = cuda.syncthreads_or(positive)


# --- numba-cuda's documentation examples, unchanged -----------------------------------------------------


@cuda.jit
def docs_fast_matmul(A, B, C):
    """numba-cuda docs, "Matrix multiplication": the fast version with shared memory."""
    # Define an array in the shared memory
    # The size and type of the arrays must be known at compile time
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)

    x, y = cuda.grid(2)

    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x  # blocks per grid

    # Each thread computes one element in the result matrix.
    # The dot product is chunked into dot products of TPB-long vectors.
    tmp = float32(0.0)
    for i in range(bpg):
        # Preload data into shared memory
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]

        # Wait until all threads finish preloading
        cuda.syncthreads()

        # Computes partial product on the shared memory
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]

        # Wait until all threads finish computing
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


@cuda.jit
def docs_array_sum(data):
    """numba-cuda docs, "Shared memory reduction" (nelem threads, one block)."""
    tid = cuda.threadIdx.x
    size = len(data)
    if tid < size:
        i = cuda.grid(1)

        # Declare an array in shared memory
        shr = cuda.shared.array(nelem, int32)
        shr[tid] = data[i]

        # Ensure writes to shared memory are visible
        # to all threads before reducing
        cuda.syncthreads()

        s = 1
        while s < cuda.blockDim.x:
            if tid % (2 * s) == 0:
                # Stride by `s` and add
                shr[tid] += shr[tid + s]
            s *= 2
            cuda.syncthreads()

        # After the loop, the zeroth  element contains the sum
        if tid == 0:
            data[tid] = shr[tid]


nelem = 1024


@cuda.jit
def docs_sequential_rows(M):
    """numba-cuda docs, "Cooperative Groups": each row depends on the previous one, a grid sync between."""
    col = cuda.grid(1)
    g = cuda.cg.this_grid()

    rows = M.shape[0]
    cols = M.shape[1]

    for row in range(1, rows):
        opposite = cols - col - 1
        # Each row's elements are one greater than the previous row
        M[row, col] = M[row - 1, opposite] + 1
        # Wait until all threads have written their column element,
        # and that the write is visible to all other threads
        g.sync()


@cuda.jit
def docs_warp_reduce(data, out):
    """A reduction of each warp with shfl_down_sync, as numba-cuda's docs on warp intrinsics use it."""
    i = cuda.grid(1)
    val = data[i]
    mask = cuda.activemask()
    offset = cuda.warpsize // 2
    while offset > 0:
        val += cuda.shfl_down_sync(mask, val, offset)
        offset //= 2
    if cuda.threadIdx.x % cuda.warpsize == 0:
        out[i // cuda.warpsize] = val


# --- a device function that synchronizes: the kernel learns it needs fibers only from its callee -----------


@od.function
def block_prefix(value):
    """The inclusive prefix sum of ``value`` over the threads of the block (Hillis-Steele in shared memory)."""
    s = cuda.shared.array(64, numba.int64)
    t = cuda.threadIdx.x
    s[t] = value
    cuda.syncthreads()
    k = 1
    while k < cuda.blockDim.x:
        v = s[t - k] if t >= k else 0
        cuda.syncthreads()
        s[t] += v
        cuda.syncthreads()
        k *= 2
    return s[t]


def scan_in_callee(a, out):
    """Names no barrier itself: it needs fibers because its callee does."""
    i = cuda.grid(1)
    out[i] = block_prefix(a[i])
