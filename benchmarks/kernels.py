"""Kernel sources for the suite, as text: each is exec'd into a fresh module (see ``_common.fresh_module``).

The overdub and numba versions of a kernel are the same code except where overdub's version calls a generic
function for a step the numba version writes inline.
"""

from __future__ import annotations

# --- part 1: empty kernels ------------------------------------------------------------------------------

LAUNCH_KERNELS = {  # kernel -> the kinds of its parameters, in order
    "k0": (),
    "k1": ("array", "scalar"),
    "k8": ("array",) * 8 + ("scalar",) * 4,
    "kstruct": ("struct",),
    "krecords": ("records",),
}
"""array: a float32 array; scalar: a float32; struct: a ``Particle`` value; records: an array of them."""

PARTICLE = """
@od.struct
class Particle:
    x: od.float32
    y: od.float32
    z: od.float32
    id: od.int32
"""
"""The struct of cases 1d and 1e (16 bytes; ``Particle.dtype`` lays it out as ``PARTICLE_C`` does)."""

PARTICLE_C = "struct Particle { float x, y, z; int id; };"
_C_TYPES = {"array": "float*", "scalar": "float", "struct": "Particle", "records": "Particle*"}


def launch_py_source() -> str:
    """``Particle`` and the empty Python kernels (used both by od.cuda and, through cuda.jit, by numba-cuda)."""
    kernels = [
        f"def {name}({', '.join(f'p{i}' for i in range(len(kinds)))}):\n    pass\n"
        for name, kinds in LAUNCH_KERNELS.items()
    ]
    return PARTICLE + "\n\n" + "\n".join(kernels)


def launch_c_source() -> str:
    """The same empty kernels in CUDA C (for cupy.RawKernel, cuda.core and the C floor)."""
    out = [PARTICLE_C]
    for name, kinds in LAUNCH_KERNELS.items():
        params = ", ".join(f"{_C_TYPES[kind]} p{i}" for i, kind in enumerate(kinds))
        out.append(f'extern "C" __global__ void {name}({params}) {{}}')
    return "\n".join(out) + "\n"


SPIN_C = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < (unsigned long long)ns);
}
"""
"""A kernel that keeps the GPU busy while the host enqueues the timed work (so host latency never shows in
the event-timed interval)."""


# --- part 2: kernels with K module-global constants and a chain of generic functions --------------------


def edges_source(k: int, chunk: int = 50) -> tuple[str, float]:
    """A module whose ``kernel(a, x)`` reads ``k`` module constants and calls a chain of min(k, 20) generic
    functions; returns the source and a function of x giving the expected ``a[0]``."""
    values = [(i % 13) * 0.125 for i in range(k)]  # exact in binary: the sum is exact
    lines = [f"C{i} = {v!r}" for i, v in enumerate(values)]
    m = min(k, 20)
    for j in range(m):
        body = f"f{j + 1}(x) + 1.0" if j < m - 1 else "x * 2.0"
        lines.append(f"@od.function\ndef f{j}(x):\n    return {body}\n")
    kernel = ["def kernel(a, x):", "    s = 0.0"]
    for start in range(0, k, chunk):
        kernel.append("    s += " + " + ".join(f"C{i}" for i in range(start, min(k, start + chunk))))
    kernel.append("    a[0] = s + f0(x)")
    source = "\n".join(lines) + "\n" + "\n".join(kernel) + "\n"
    constant = sum(values) + (m - 1) * 1.0
    return source, constant  # expected a[0] = constant + 2 * x


# --- part 3 (and 5): saxpy, block reduction, 5-point stencil ---------------------------------------------

SAXPY_OD = """
@od.function
def axpy(a: od.Float, x: od.Float, y: od.Float):
    return a * x + y

@od.function
def scale(a: od.Float):
    return a * 2          # the base meaning; the "bench" context overdubs it to the identity

bench = od.Context("bench")

@bench.overdub(scale)
def _scale_in_bench(a: od.Float):
    return a

def saxpy(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = axpy(scale(a), x[i], y[i])

def saxpy_strided(a, x, y):            # grid-stride: a few waves of blocks, more loads in flight per thread
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < x.size:
        y[i] = axpy(scale(a), x[i], y[i])
        i += step

def saxpy_exact(a, x, y):              # for a grid of exactly x.size threads: no bounds check
    i = cuda.grid(1)
    y[i] = axpy(scale(a), x[i], y[i])

def saxpy_vector(a, x, y, n4):         # x, y: Ptr[float32]; four elements a thread in 128-bit loads and stores
    i = cuda.grid(1)
    if i < n4:
        s = scale(a)
        xs = od.vload(x, i, 4)
        ys = od.vload(y, i, 4)
        od.vstore(y, (axpy(s, xs[0], ys[0]), axpy(s, xs[1], ys[1]), axpy(s, xs[2], ys[2]), axpy(s, xs[3], ys[3])), i)
"""

SAXPY_NUMBA = """
def saxpy(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]

def saxpy_strided(a, x, y):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < x.size:
        y[i] = a * x[i] + y[i]
        i += step

def saxpy_loop(a, x, y):
    for i in range(x.size):
        y[i] = a * x[i] + y[i]
"""

REDUCE_TEMPLATE = """
{prelude}
def reduce(a, out):
    sm = cuda.shared.array(256, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sm[t] = a[i] if i < a.size else numba.float32(0)
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sm[t] = {combine}
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sm[0]
"""

REDUCE_OD = REDUCE_TEMPLATE.format(
    prelude="@od.function\ndef combine(x: od.Float, y: od.Float):\n    return x + y\n",
    combine="combine(sm[t], sm[t + s])",
)
REDUCE_NUMBA = REDUCE_TEMPLATE.format(prelude="", combine="sm[t] + sm[t + s]")
REDUCE_THREADS = 256

STENCIL = """
def stencil(a, b):
    x, y = cuda.grid(2)
    if x >= 1 and y >= 1 and y < a.shape[0] - 1 and x < a.shape[1] - 1:
        b[y, x] = numba.float32(0.25) * (a[y - 1, x] + a[y + 1, x] + a[y, x - 1] + a[y, x + 1]) - a[y, x]

def stencil_loop(a, b):
    for y in range(1, a.shape[0] - 1):
        for x in range(1, a.shape[1] - 1):
            b[y, x] = numba.float32(0.25) * (a[y - 1, x] + a[y + 1, x] + a[y, x - 1] + a[y, x + 1]) - a[y, x]
"""
STENCIL_THREADS = (32, 8)


def stencil_reference(a, xp):
    """The stencil with array operations (numpy or cupy), float32 throughout, the kernel's order of sums."""
    b = xp.zeros_like(a)
    quarter = a.dtype.type(0.25)
    b[1:-1, 1:-1] = quarter * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]) - a[1:-1, 1:-1]
    return b


# --- part 4: a library of generic functions, 20 kernels, exactly 2 of them using leaf L ------------------

LIBRARY = """
@od.function
def L(x: od.Float):
    return x * 1.5

@od.function
def leaf1(x: od.Float):
    return x + 1.0

@od.function
def leaf2(x: od.Float):
    return x * x

@od.function
def leaf3(x: od.Float):
    return x - 0.5

@od.function
def leaf4(x: od.Float):
    return math.sqrt(abs(x) + 1.0)

@od.function
def leaf5(x: od.Float):
    return x * 0.25 + 2.0

@od.function
def mid0(x: od.Float):
    return leaf1(x) + leaf2(x)

@od.function
def mid1(x: od.Float):
    return leaf2(x) * leaf3(x)

@od.function
def mid2(x: od.Float):
    return leaf4(x) - leaf5(x)

@od.function
def mid3(x: od.Float):
    return mid0(x) + leaf3(x)
"""
LIBRARY_POOL = ["leaf1", "leaf2", "leaf3", "leaf4", "leaf5", "mid0", "mid1", "mid2", "mid3"]  # all but L
L_USERS = (3, 11)  # the two kernels that call L
N_KERNELS = 20


def kernel_callees(i: int) -> tuple[str, str]:
    pool = LIBRARY_POOL
    if i in L_USERS:
        return "L", pool[i % len(pool)]
    f, g = pool[i % len(pool)], pool[(4 * i + 1) % len(pool)]
    return f, g


def library_kernels_source() -> str:
    out = []
    for i in range(N_KERNELS):
        f, g = kernel_callees(i)
        out.append(f"def k{i}(a, x):\n    j = cuda.grid(1)\n    if j < a.size:\n        a[j] = {f}(x) + {g}(a[j])\n")
    return "\n".join(out)


def redefine_l_source(factor: float) -> str:
    return f"@od.function\ndef L(x: od.Float):\n    return x * {factor!r}\n"


def as_numba_device(source: str) -> str:
    """The library with every generic function made a numba-cuda device function instead."""
    return source.replace("@od.function", "@cuda.jit(device=True)")


def as_plain_python(source: str) -> str:
    """The library as plain Python functions (the reference for correctness checks)."""
    return source.replace("@od.function\n", "")


# --- part 3 (iv): forward-mode AD with examples/forwarddiff.py against the derivative written by hand ------
AUTODIFF = """
import sys
sys.path.insert(0, EXAMPLES)
from forwarddiff import derivative

def f(x):
    return math.sin(x) * math.exp(x) + x ** 2

def by_dual(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = derivative(f, xs[i])

def by_hand(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        x = xs[i]
        e = math.exp(x)
        out[i] = math.cos(x) * e + math.sin(x) * e + 2.0 * x
"""
