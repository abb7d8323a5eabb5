"""What ``import overdub`` imports: nothing of numba-cuda, the CUDA bindings or cupy. numba-cuda's names mean
on the CPU target what they always did once a program imports numba-cuda, and a kernel compiled before that
stays compiled. Each check runs in a fresh process (this one imported numba-cuda long ago)."""

import textwrap

import pytest

from helpers import run_python
from overdub.targets import gpu

GPU_STACK = ("numba.cuda", "cuda.bindings", "cuda.core", "cupy")


def _run(*sources: str, **env: str) -> str:
    """Run ``sources``, one after another, in a fresh interpreter (the disk cache off: what runs is compiled
    there); its stdout."""
    return run_python(
        "-c", "\n".join(textwrap.dedent(source) for source in sources), env={"OVERDUB_CACHE": "0", **env}
    ).stdout


PRINT_GPU_STACK = f"""
import sys
print(sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in {GPU_STACK!r})))
"""


def test_importing_overdub_imports_nothing_of_numba_cuda_the_cuda_bindings_or_cupy():
    out = _run("import overdub", PRINT_GPU_STACK)
    assert out.split("\n")[0] == "[]"


def test_importing_overdub_imports_what_definitions_need_and_the_rest_loads_at_first_use():
    """``import overdub`` imports what defining generic functions, structs and contexts needs, and the
    engines' hooks (each installed as its engine's module is imported); the drop-in, the targets, the compile
    pipeline and what ships the user's code load at their first use -- a launch, a pickle -- and each works
    then."""
    out = _run(
        """
        import pickle, sys
        import overdub as od
        later = ("overdub.dropin", "overdub.compiler", "overdub.targets", "overdub.byvalue",
                 "overdub.travel.identities", "overdub.reflect", "overdub.intrinsics")
        print(sorted(m for m in later if m in sys.modules))

        @od.function
        def f(x: od.Integer):
            return x + 1

        print(pickle.loads(pickle.dumps(f)) is f, "overdub.travel.identities" in sys.modules)
        import multiprocessing.pool
        import overdub.byvalue
        print(multiprocessing.pool.Pool.__module__ == "multiprocessing.pool" and overdub.byvalue._cloudpickle is not None)
        print(od.which(f, od.int64) is not None, od.CPU.name, callable(od.jit), od.cuda.__name__)
        """
    )
    assert out.split("\n")[:4] == ["[]", "True True", "True", "True CPU True overdub.cuda"]


def test_a_cpu_kernel_that_names_no_numba_cuda_runs_without_importing_it():
    out = _run(
        """
        import numpy as np
        import overdub as od

        def kernel(out, n):
            for i in range(n):
                out[i] = i * 2

        out = np.zeros(4)
        od.cuda(kernel, out, 4, target="cpu")
        print(out.tolist())
        """,
        PRINT_GPU_STACK,
    )
    assert out.split("\n")[:2] == ["[0.0, 2.0, 4.0, 6.0]", "[]"]


@pytest.mark.skipif(gpu._driver_loadable(), reason="an NVIDIA driver loads here: numba-cuda answers")
def test_without_an_nvidia_driver_the_default_target_is_the_cpu_without_importing_numba_cuda():
    out = _run("import overdub as od\nprint(od.default_target())", PRINT_GPU_STACK)
    assert out.split("\n")[:2] == ["cpu", "[]"]


def test_numba_cudas_idiom_means_the_cpu_targets_once_the_program_imports_numba_cuda():
    out = _run(
        """
        import math
        import numpy as np
        import overdub as od
        from numba import cuda

        def kernel(out, total):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = cuda.libdevice.sqrt(float(i * i)) + cuda.threadIdx.x
                cuda.atomic.add(total, 0, 1)

        out, total = np.zeros(4), np.zeros(1, np.int64)
        od.cuda(kernel, out, total, blocks=1, threads=4, target="cpu")
        print(out.tolist(), total.tolist())
        """
    )
    assert out.split("\n")[0] == "[0.0, 2.0, 4.0, 6.0] [4]"


def test_reading_a_name_of_overdubs_cuda_namespace_gives_the_idiom_its_meaning_on_the_cpu():
    out = _run(
        """
        import sys
        import numpy as np
        from overdub import cuda

        print("numba.cuda" in sys.modules)

        @cuda.jit
        def kernel(out):
            i = cuda.grid(1)
            out[i] = cuda.threadIdx.x * 10 + cuda.fp16.hadd(np.float16(1), np.float16(1))

        out = np.zeros(4)
        kernel[1, 4](out)
        print(out.tolist())
        """,
        OVERDUB_TARGET="cpu",
    )
    assert out.split("\n")[:2] == ["False", "[2.0, 12.0, 22.0, 32.0]"]


def test_a_cpu_kernel_compiled_before_numba_cuda_is_imported_is_not_compiled_again_after():
    out = _run(
        """
        import numpy as np
        import overdub as od

        def kernel(out):
            out[0] += 1

        out = np.zeros(1)
        od.cuda(kernel, out, target="cpu")
        compiles = od.stats()["compiles"]
        from numba import cuda  # the CPU target's meaning of numba-cuda's names is added now

        od.cuda(kernel, out, target="cpu")
        print(out.tolist(), od.stats()["compiles"] - compiles)
        """
    )
    assert out.split("\n")[0] == "[2.0] 0"
