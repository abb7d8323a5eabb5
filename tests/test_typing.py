"""A user's file annotated with overdub's lattice passes mypy with overdub.mypy_plugin: the lattice's names
are types to a type checker, ``od.Array[T, N]`` is a NumPy array, and the methods of a generic function are
successive defs of one name, not redefinitions."""

import textwrap

import pytest

from helpers import ROOT, run_python

pytest.importorskip("mypy")


USER_FILE = """
    import math
    import operator

    import numpy as np

    import overdub as od
    from overdub import function

    ctx = od.Context("user")


    @od.function
    def scale(x: od.Integer, k: od.Number):  # integers stay integers
        return x * k


    @od.function
    def scale(x: od.Float, k: od.Float):  # a second method of the same generic function
        return x * k


    @function
    def norm(x: od.float32) -> od.float32:
        return x * x


    @function
    def norm(x: od.float64) -> od.float64:
        return x * x


    @od.method(math.sin)
    def sin(x: od.Boolean) -> float:
        return 0.0


    @ctx.overdub(operator.getitem)
    def _(a: od.Array[od.float64, 1], i: od.Integer) -> float:
        return float(a[i]) + 100


    @ctx.overdub(operator.add)
    def _(a: od.Integer, b: od.Integer) -> od.Integer:
        return a - b


    def kernel(out: od.Array[od.float32, 2], x: od.Array[od.float32], p: od.Ptr[od.float32]) -> None:
        out[0, 0] = scale(x[0], od.float32(2)) + norm(od.float32(out.shape[0]))


    reveal_type(scale)
    reveal_type(kernel)
    reveal_type(od.cuda)
    reveal_type(od.cuda.__call__)
    od.cuda(kernel, np.zeros((2, 2), np.float32), np.zeros(2, np.float32), od.pointer(np.zeros(2, np.float32)))
    reveal_type(od.cuda.to_device)
"""

CONFIG = f"""
[mypy]
plugins = overdub.mypy_plugin
mypy_path = {ROOT}
warn_unused_ignores = True

[mypy-overdub.*]
follow_imports = silent

[mypy-numba.*,llvmlite.*,cupy.*,cuda.*]
ignore_missing_imports = True
"""


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory) -> dict:
    """mypy's verdict on USER_FILE: its exit status, its errors and what each reveal_type revealed."""
    directory = tmp_path_factory.mktemp("typing")
    (directory / "user.py").write_text(textwrap.dedent(USER_FILE))
    (directory / "mypy.ini").write_text(CONFIG)
    mypy = ("-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", directory / "cache", "user.py")
    result = run_python(*mypy, cwd=directory, timeout=600, check=False)
    lines = result.stdout.splitlines()
    return {
        "status": result.returncode,
        "errors": [line for line in lines if ": error:" in line],
        "revealed": [line.split("Revealed type is ", 1)[1] for line in lines if "Revealed type is" in line],
        "stdout": result.stdout,
    }


def test_a_file_annotated_with_the_lattice_and_with_methods_passes_mypy(mypy_output):
    assert mypy_output["errors"] == [], mypy_output["stdout"]
    assert mypy_output["status"] == 0, mypy_output["stdout"]


def test_a_generic_function_is_a_generic_function_to_mypy(mypy_output):
    assert mypy_output["revealed"][0] == '"overdub.registry.GenericFunction"'


def test_an_array_annotation_is_a_numpy_array_of_its_element_type_and_dimensions(mypy_output):
    out, x, p = mypy_output["revealed"][1].split(", p: ")[0].split(", x: ") + [mypy_output["revealed"][1]]
    assert out.startswith('"def (out: numpy.ndarray[tuple[int, int], numpy.dtype[numpy.floating['), out
    assert x.startswith("numpy.ndarray[tuple[int, ...], numpy.dtype[numpy.floating["), x
    assert "_32Bit" in out and "_32Bit" in x and "p: overdub.annotations.Ptr[numpy.floating[" in p


def test_od_cuda_is_the_namespace_whose_call_has_the_launchs_signature_to_mypy(mypy_output):
    namespace, call, attribute = mypy_output["revealed"][2:5]
    assert namespace == '"overdub.cuda.CudaNamespace"', namespace
    assert call.startswith('"def (kernel'), call
    assert attribute == '"Any"', attribute  # numba-cuda's names, looked up when read


def test_the_lattice_is_what_dispatch_uses_at_run_time():
    import overdub as od
    from overdub import types

    assert od.Integer is types.Integer and od.Array is types.Array and od.float32 is types.float32
