"""Definitions run again unchanged -- a notebook cell run a second time (new code objects, a new file name, the
same namespace), ``exec``, ``importlib.reload`` -- compile and load nothing; a changed one recompiles exactly
what depends on it (overdub/reruns.py)."""

import importlib
import linecache
import math
import sys
import types

import numpy as np
import pytest

import overdub as od
from helpers import unique_name
from overdub import reruns

CELL = """
import numpy as np
import overdub as od
from numba import cuda

@od.function
def g(v):
    return v * 2

@od.jit(device=True)
def h(v):
    return v + 1

def kern(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = g(h(a[i]))

@od.jit
def kern2(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = h(a[i])

a = np.zeros(4)
od.cuda(kern, a, blocks=1, threads=4, target="cpu")
kern2[1, 4](a)
"""


class Notebook:
    """A namespace cells run in as ipykernel runs them: each run compiled anew under a file name of its own."""

    def __init__(self):
        self.name = unique_name("notebook")
        self.module = types.ModuleType(self.name)
        sys.modules[self.name] = self.module
        self.runs = 0

    def run(self, cell: str) -> dict:
        filename = f"<ipython-input-{self.runs}-{self.name}>"
        self.runs += 1
        linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
        exec(compile(cell, filename, "exec"), self.module.__dict__)
        return od.stats()

    def __getattr__(self, name):
        return getattr(self.module, name)


@pytest.fixture
def notebook():
    book = Notebook()
    yield book
    sys.modules.pop(book.name, None)


@pytest.mark.parametrize("cache", ["0", "1"])
def test_a_cell_run_again_unchanged_compiles_and_loads_nothing(notebook, monkeypatch, cache):
    monkeypatch.setenv("OVERDUB_CACHE", cache)
    before = od.invalidation_log()  # (at most 1000 kept: the new entries are those after its last)
    first = notebook.run(CELL)
    assert first["compiles"] == 2 and notebook.a.tolist() == [3.0] * 4
    for _ in range(2):
        again = notebook.run(CELL)
        assert (again["compiles"], again["disk_hits"], again["method_instances"]) == (2, 0, 2)
        assert notebook.a.tolist() == [3.0] * 4
    log = od.invalidation_log()
    new = log[next((i + 1 for i, e in enumerate(log) if before and e is before[-1]), 0) :]
    assert new and not any("redefined" in entry.cause for entry in new)  # (g and h defined: logged)


def test_a_changed_cell_recompiles_exactly_what_depends_on_the_change(notebook, monkeypatch):
    monkeypatch.setenv("OVERDUB_CACHE", "0")
    notebook.run(CELL)
    changed = notebook.run(CELL.replace("v * 2", "v * 3"))  # g: kern depends on it, kern2 does not
    assert (changed["compiles"], notebook.a.tolist()) == (3, [4.0] * 4)
    assert notebook.run(CELL.replace("v * 2", "v * 3"))["compiles"] == 3  # and unchanged again
    kern2_changed = CELL.replace("v * 2", "v * 3").replace("a[i] = h(a[i])", "a[i] = h(a[i]) + 10")
    assert (notebook.run(kern2_changed)["compiles"], notebook.a.tolist()) == (4, [14.0] * 4)


def test_a_global_changed_between_runs_of_an_unchanged_def_is_read_anew(notebook, monkeypatch):
    monkeypatch.setenv("OVERDUB_CACHE", "0")
    cell = "import numpy as np\nimport overdub as od\nN = {}\n\ndef k(a):\n    a[0] = N\n\na = np.zeros(1)\n"
    cell += "od.cuda(k, a, target='cpu')\n"
    notebook.run(cell.format(3))
    assert notebook.a[0] == 3
    notebook.run(cell.format(4))  # k unchanged, the global it reads changed: its edge recompiles it
    assert notebook.a[0] == 4 and od.stats()["compiles"] == 2
    notebook.run(cell.format(4))
    assert od.stats()["compiles"] == 2


def test_contexts_their_overdubs_and_hooks_run_again_unchanged_change_nothing(notebook, monkeypatch):
    monkeypatch.setenv("OVERDUB_CACHE", "0")
    cell = """
import math
import numpy as np
import overdub as od

ctx = od.Context("fast")
inner = od.Context("inner", parent=ctx)

@ctx.overdub(math.sin)
def _(x):
    return x * 10.0

@inner.prehook(math.cos)
def _(x):
    pass

def k(a):
    a[0] = math.sin(a[1]) + math.cos(0.0)

a = np.ones(2)
od.cuda(k, a, target="cpu", context=inner)
"""
    notebook.run(cell)
    ctx, inner = notebook.ctx, notebook.inner
    notebook.run(cell)
    assert notebook.ctx is ctx and notebook.inner is inner and od.stats()["compiles"] == 1
    notebook.run(cell.replace("10.0", "20.0"))
    assert notebook.a[0] == 21.0 and od.stats()["compiles"] == 2


def test_contexts_made_by_one_statement_run_several_times_are_several_contexts():
    made = [od.Context("looped") for _ in range(3)]  # one code object: three contexts
    assert len({id(c) for c in made}) == 3
    namespace = {"od": od}
    exec(
        compile("contexts = []\nfor i in range(3):\n    contexts.append(od.Context('c'))\n", "<loop>", "exec"),
        namespace,
    )
    assert len({id(c) for c in namespace["contexts"]}) == 3


def test_a_module_reloaded_unchanged_compiles_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERDUB_CACHE", "0")
    name = unique_name("reloaded")
    (tmp_path / f"{name}.py").write_text(
        "import overdub as od\n\n@od.function\ndef f(x):\n    return x + 1\n\ndef k(a):\n    a[0] = f(a[0])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    a = np.zeros(1)
    od.cuda(module.k, a, target="cpu")
    importlib.reload(module)
    od.cuda(module.k, a, target="cpu")
    assert a[0] == 2 and od.stats()["compiles"] == 1


def test_what_makes_two_defs_the_same_definition():
    namespace: dict = {}
    source = "def f(x, k=1):\n    return x + k * 2.5\n"
    exec(compile(source, "<one>", "exec"), namespace)
    first = namespace["f"]
    exec(compile("\n\n" + source, "<two>", "exec"), namespace)  # elsewhere, another file: the same definition
    assert reruns.same_definition(first, namespace["f"])
    for changed in (
        source.replace("2.5", "2"),  # 2 is not 2.5
        source.replace("k=1", "k=1.0"),  # nor 1.0 1 (a default)
        source.replace("k=1", "k=True"),
        source.replace("x + k", "k + x"),
    ):
        exec(compile(changed, "<three>", "exec"), namespace)
        assert not reruns.same_definition(first, namespace["f"]), changed
    exec(compile(source, "<four>", "exec"), other := {})  # another namespace: what it reads may differ
    assert not reruns.same_definition(first, other["f"])
    arrays = {"np": np}
    exec(compile("def f(x, a=np.zeros(2)):\n    return a\n", "<five>", "exec"), arrays)
    with_array = arrays["f"]
    exec(compile("def f(x, a=np.zeros(2)):\n    return a\n", "<six>", "exec"), arrays)
    assert not reruns.same_definition(with_array, arrays["f"])  # equal arrays, two objects: not the same
    assert math.isnan(float("nan")) and not reruns.same_values((float("nan"),), (float("nan"),))


def test_a_kernel_run_again_launches_from_the_launch_table_and_an_assigned_code_is_seen(notebook, monkeypatch):
    from overdub.runtime import runtime

    monkeypatch.setenv("OVERDUB_CACHE", "0")
    cell = "import numpy as np\nimport overdub as od\n\ndef k(a):\n    a[0] += 1\n"
    notebook.run(cell)
    a = np.zeros(1)
    od.cuda(notebook.k, a, target="cpu")
    notebook.run(cell)
    k = notebook.k
    od.cuda(k, a, target="cpu")  # the first def's kernel, added to the table under this def too
    assert a[0] == 2 and od.stats()["compiles"] == 1
    assert any(key[0]() is k for key in runtime.launches)

    def other(a):
        a[0] = 100

    k.__code__ = other.__code__  # no longer the same definition: its table entry refuses, it compiles anew
    od.cuda(k, a, target="cpu")
    assert a[0] == 100 and od.stats()["compiles"] == 2
