"""Where a newcomer's kernel fails, a few lines say what is wrong, where, and what to do (overdub/diagnosis.py,
overdub/places.py); numba's whole report stays in the error's ``details``."""

import sys
import types

import numba
import numpy as np
import pytest

import overdub as od
from overdub import places

ARRAY = numba.float64[::1]

CASES = {
    "dict": ("def k(a):\n    d = {1: 2.0}\n    a[0] = d[1]\n", 2, "dicts are not supported in kernels"),
    "set": ("def k(a):\n    s = {1, 2}\n    a[0] = len(s)\n", 2, "sets are not supported in kernels"),
    "list": ("def k(a):\n    xs = [1.0, 2.0]\n    a[0] = xs[0]\n", 2, "lists are not supported in kernels"),
    "generator": (
        "def k(a):\n    a[0] = sum(x for x in range(3))\n",
        2,
        "generators and generator expressions are not supported",
    ),
    "try": (
        "def k(a):\n    try:\n        a[0] = 1\n    except ValueError:\n        a[0] = 2\n",
        4,
        "try/except is not supported in kernels",
    ),
    "class": ("class C:\n    pass\n\ndef k(a):\n    C()\n", 5, "C is a Python class, which kernels cannot use"),
    "name": (
        "scale = 2.0\n\ndef k(a):\n    a[0] = a[0] * scael\n",
        4,
        "name 'scael' is not defined -- did you mean 'scale'?",
    ),
    "shared": (
        "from numba import cuda\nimport numba\n\ndef k(a, n):\n    s = cuda.shared.array(n, numba.float64)\n    a[0] = s[0]\n",
        5,
        "cuda.shared.array's shape must be a constant",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_construct_kernels_lack_is_named_with_its_line_and_what_to_do(make_module, case):
    source, line, plain = CASES[case]
    m = make_module(source, prefix=f"diagnosed_{case}")
    argtypes = (ARRAY, numba.int64) if case == "shared" else (ARRAY,)
    with pytest.raises(od.CompileError) as raised:
        od.code_ptx(m.k, *argtypes)
    message = str(raised.value)
    assert f"{m.__name__}.py:{line}: {plain}" in message, message
    assert len(message.splitlines()) <= 4 and "OVERDUB_ERRORS=full" in message
    assert raised.value.details.startswith("compiling kernel k(") and raised.value.details != message


def test_a_dict_is_named_even_where_getitem_has_methods(make_module):
    m = make_module(
        "import overdub as od\n\n@od.struct\nclass Box:\n    v: od.float64\n\n"
        "    def __getitem__(self, k: od.Integer):\n        return self.v\n",
        prefix="boxed",
    )  # a method of getitem: d[1] is dispatched, and finds none for a dict
    k = make_module(CASES["dict"][0], prefix="diagnosed_dispatched")
    with pytest.raises(od.CompileError, match=r"diagnosed_dispatched_\d+\.py:2: dicts are not supported") as raised:
        od.code_ptx(k.k, ARRAY)
    assert "no method matching getitem(DictType" in raised.value.details and m.Box


def test_numbas_report_follows_with_overdub_errors_full(make_module, monkeypatch):
    monkeypatch.setenv("OVERDUB_ERRORS", "full")
    m = make_module(CASES["dict"][0], prefix="diagnosed_full")
    with pytest.raises(od.CompileError) as raised:
        od.code_ptx(m.k, ARRAY)
    assert "dicts are not supported" in str(raised.value) and "DictType[int64,float64]" in str(raised.value)


def test_a_failure_it_does_not_know_keeps_numbas_report(make_module):
    # (a builtin no test adds methods to: a store of a string reports overdub's MethodError once some test's
    # struct defined __setitem__, in whatever order the tests run)
    m = make_module("def k(a):\n    a[0] = ord(1.5)\n", prefix="diagnosed_not")
    with pytest.raises(od.CompileError) as raised:
        od.code_ptx(m.k, ARRAY)
    assert "OVERDUB_ERRORS" not in str(raised.value) and raised.value.details == str(raised.value)


def test_a_launch_configuration_error_names_the_kernel_and_suggests_integer_division(make_module):
    m = make_module("def k(a):\n    a[0] = 1\n", prefix="config")
    a = np.zeros(1)
    for _ in range(2):  # the first launch (slow path), then with the kernel in the launch table
        with pytest.raises(
            ValueError, match=r"od.cuda\(k, \.\.\.\): blocks must be .* not 4.9 \(a float: divide with //"
        ):
            od.cuda(m.k, a, blocks=4.9, target="cpu")
        od.cuda(m.k, a, blocks=1, target="cpu")
    with pytest.raises(ValueError, match=r"od.cuda\(k, \.\.\.\): threads=2048 exceeds CUDA's limits"):
        od.cuda(m.k, a, threads=2048, target="cpu")


def test_a_kernel_returning_a_value_is_refused_at_its_return(make_module):
    m = make_module("import overdub as od\n\n@od.jit\ndef k(a):\n    a[0] = 1\n    return 5\n", prefix="returns")
    with pytest.raises(TypeError, match=rf"kernel k returns a value \({m.__name__}.py:6\)"):
        m.k[1, 1](np.zeros(1))


def test_a_checked_kernels_out_of_range_report_is_not_chained_to_the_runners_signal(make_module):
    m = make_module("def k(a):\n    a[5] = 1.0\n", prefix="checked")
    with pytest.raises(IndexError, match=r"index 5 is out of bounds .* of kernel k at checked_\d+\.py:2") as raised:
        od.cuda(m.k, np.zeros(2), target="cpu", debug=True)
    assert raised.value.__suppress_context__  # no "During handling of the above exception" first


def test_the_invalidation_log_shows_the_users_definitions_and_overdubs_own_on_request(make_module):
    m = make_module("import overdub as od\n\n@od.function\ndef fresh_gf(x):\n    return x\n", prefix="logged")
    users = od.invalidation_log()
    assert any("fresh_gf(x) defined" in e.cause for e in users)
    assert not any(e.internal for e in users) and all(e in od.invalidation_log(internal=True) for e in users)
    ctx = od.Context("logged")
    ctx.forward(m.fresh_gf, abs)  # a user's context: the user's entry
    assert "forwards" in od.invalidation_log()[-1].cause and not od.invalidation_log()[-1].internal


def test_a_notebook_cells_lines_are_named_as_the_cell(monkeypatch):
    filename = "/tmp/ipykernel_1234/3006015857.py"
    assert places.place(filename, 2) == "3006015857.py:2"
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={filename: 3}))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert places.place(filename, 2) == "In[3]:2" and places.place("/x/other.py", 1) == "other.py:1"


# --- CPU/GPU parity and unclear errors, found adversarially (issue 36 item 7) ----------------------------


def test_a_float16_scalar_argument_runs_on_the_cpu_target():
    def k(a, x):
        a[0] = x * 2

    a = np.zeros(1, dtype=np.float16)
    od.cuda(k, a, np.float16(1.5), target="cpu")  # crashed the process (numba's JIT called __truncdfhf2)
    assert a[0] == 3.0
    assert od.overdub(None, lambda x: x, np.float16(2.5)) == 2.5  # a half returned to Python


def test_od_graph_on_the_cpu_target_refuses_what_the_cuda_path_refuses():
    def k(a, x):
        a[0] += x

    a = np.zeros(1)
    with od.graph(target="cpu") as g:
        od.cuda(k, a, 1.0, target="cpu")
    g.launch()
    with pytest.raises(TypeError, match=r"update of launch 0: .*k was captured for .*float64\), these .*int64\)"):
        g.update(0, a, 2)
    g.update(0, a, 2.0)
    g.launch()
    assert a[0] == 3.0
    g.close()
    with pytest.raises(RuntimeError, match="closed"):
        g.launch()
    with pytest.raises(KeyError), od.graph(target="cpu") as failed:
        od.cuda(k, a, 1.0, target="cpu")
        raise KeyError("the block failed")
    with pytest.raises(RuntimeError, match="capture failed"):
        failed.launch()
    assert a[0] == 3.0


def test_od_overdub_on_the_host_passes_a_functions_defaults():
    def f(x, k=2.0):
        return x * k

    assert od.overdub(od.Context("host_defaults"), f, 1.5) == 3.0  # was numba's "Signature mismatch"
    assert od.overdub(None, f, 1.5, 3.0) == 4.5


def test_an_int_beyond_64_bits_is_refused_before_anything_compiles():
    def k(a, n):
        a[0] = n

    a = np.zeros(1, dtype=np.uint64)
    od.cuda(k, a, 2**64 - 1, target="cpu")
    assert a[0] == 2**64 - 1
    compiles = od.stats()["compiles"]
    for value in (-(2**63) - 5, 2**64):  # was typed uint64, compiled, then "overdub internal error"
        with pytest.raises(OverflowError, match=f"the int {value} does not fit in 64 bits"):
            od.cuda(k, a, value, target="cpu")
    assert od.stats()["compiles"] == compiles


def test_the_invalidation_tree_shows_the_recompile_that_followed_each_invalidation(make_module):
    gf = "import overdub as od\n\n@od.function\ndef f(x):\n    return x + {}\n"
    m = make_module(gf.format(1) + "\ndef k(a):\n    a[0] = f(a[0])\n", prefix="tree")
    od.cuda(m.k, np.zeros(1), target="cpu")
    m.run(gf.format(2))  # invalidates the kernel now: the tree has it before any recompile
    kernel_lines = [line for line in str(od.invalidation_tree()).splitlines() if "kernel k(" in line]
    assert kernel_lines and "recompiled" not in kernel_lines[-1]  # not yet: the first compile's time was shown
    od.cuda(m.k, np.zeros(1), target="cpu")
    kernel_lines = [line for line in str(od.invalidation_tree()).splitlines() if "kernel k(" in line]
    assert " -> recompiled in " in kernel_lines[-1]
