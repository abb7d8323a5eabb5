"""The one-import switch as source text (overdub.switch), and the compatibility harness's import hook, which loads
numba-cuda's own test modules with their imports switched (benchmarks/compat.py --switch import)."""

import importlib.machinery
import importlib.util
import inspect
import io
import json
import sys
import unittest
from pathlib import Path

import pytest

from helpers import ROOT, run_python
from overdub.switch import SwitchedFinder, SwitchedLoader, switched_source

PLUGIN_DIR = ROOT / "benchmarks" / "compat"
_spec = importlib.util.spec_from_file_location(
    "overdub_compat_plugin_under_test", PLUGIN_DIR / "overdub_compat_plugin.py"
)
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)  # OVERDUB_COMPAT_PATCH unset: defines the hook, installs nothing

CUDAPY = "numba.cuda.tests.cudapy"
LOCALMEM = f"{CUDAPY}.test_localmem"


@pytest.mark.parametrize(
    ("line", "switched"),
    [
        ("from numba import cuda", "from overdub import cuda"),
        ("    from numba import cuda", "    from overdub import cuda"),
        ("from numba import cuda as nc", "from overdub import cuda as nc"),
        ("from numba import cuda, vectorize", "from overdub import cuda; from numba import vectorize"),
        (
            "from numba import errors, cuda  # note",
            "from overdub import cuda; from numba import errors  # note",
        ),
        ("from numba.cuda import int32, void", "from overdub.cuda import int32, void"),
        ("from numba.cuda import (", "from overdub.cuda import ("),
        ("from numba.cuda.core.config import ENABLE_CUDASIM", "from overdub.cuda.core.config import ENABLE_CUDASIM"),
    ],
)
def test_a_users_imports_of_numba_cuda_are_switched_to_overdub(line, switched):
    assert switched_source(line + "\n") == switched + "\n"


@pytest.mark.parametrize(
    "line",
    [
        "from numba.cuda.testing import unittest, CUDATestCase",
        "from numba.cuda.tests.support import override_config",
        "from numba.cuda.tests.cudapy.complex_usecases import (",
        "import numba.cuda",
        "import numba",
        "from numba import njit, vectorize",
        "from numba.core.errors import TypingError",
        "from numba import (cuda,",
    ],
)
def test_the_harness_module_references_and_other_numba_imports_are_left_alone(line):
    assert switched_source(line + "\n") == line + "\n"


def test_every_numba_cuda_test_module_keeps_each_line_on_its_line():
    """Only import lines change, so a switched module compiled under its file's name has the file's lines."""
    spec = importlib.util.find_spec(CUDAPY)
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("test_*.py"))
    assert len(files) > 50
    for path in files:
        source = path.read_text()
        switched = switched_source(source)
        assert len(switched.splitlines()) == len(source.splitlines()), path.name
        changed = [new for old, new in zip(source.splitlines(), switched.splitlines()) if old != new]
        assert all(line.lstrip().startswith("from overdub") for line in changed), path.name


@pytest.fixture
def hook(monkeypatch):
    """The harness's import switch installed as ``--switch import`` installs it (the hook first on
    ``sys.meta_path``, overdub.cuda's jit counting), its record written to a buffer; all of it undone after,
    the switched test modules forgotten."""
    import overdub.cuda

    if importlib.util.find_spec("filecheck") is None:  # numba.cuda.testing imports it; the harness's stub
        monkeypatch.syspath_prepend(str(PLUGIN_DIR / "stubs"))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(overdub.cuda, "jit", overdub.cuda.jit)
    record = io.StringIO()
    monkeypatch.setattr(plugin, "_out", record)
    before = set(sys.modules)
    plugin._install_import()
    yield record
    for name in set(sys.modules) - before:
        if name.startswith(plugin.TEST_MODULES):
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            vars(sys.modules[parent]).pop(child, None)


def _events(record: io.StringIO, kind: str) -> list[dict]:
    return [event for event in map(json.loads, record.getvalue().splitlines()) if event["event"] == kind]


def test_the_hook_finds_numba_cudas_test_modules_and_nothing_else(hook):
    finder = sys.meta_path[0]
    assert isinstance(finder, SwitchedFinder)
    cudapy = importlib.import_module(CUDAPY).__path__
    assert isinstance(finder.find_spec(LOCALMEM, cudapy).loader, SwitchedLoader)
    assert finder.find_spec(f"{CUDAPY}.extensions_usecases", cudapy) is None
    assert finder.find_spec("numba.cuda.testing", importlib.import_module("numba.cuda").__path__) is None
    assert finder.find_spec("numba.cuda.tests.support", importlib.import_module("numba.cuda.tests").__path__) is None


def test_a_test_module_imported_through_the_hook_names_overdubs_cuda_and_numba_cudas_harness(hook):
    import numba.cuda
    import numba.cuda.testing

    import overdub.cuda

    module = importlib.import_module(LOCALMEM)
    assert module.cuda is overdub.cuda
    assert module.int32 is numba.cuda.int32  # read through overdub.cuda: numba-cuda's type
    assert module.CUDATestCase is numba.cuda.testing.CUDATestCase
    assert type(numba.cuda.testing.__loader__) is importlib.machinery.SourceFileLoader  # loaded as shipped
    assert _events(hook, "switched") == [{"event": "switched", "module": LOCALMEM, "lines": 5}]


def test_a_switched_test_module_keeps_its_file_and_line_numbers(hook):
    module = importlib.import_module(LOCALMEM)
    path = Path(importlib.util.find_spec(CUDAPY).submodule_search_locations[0]) / "test_localmem.py"
    assert module.__file__ == str(path)
    code = module.culocal.__code__
    assert code.co_filename == str(path)
    assert path.read_text().splitlines()[code.co_firstlineno - 1] == "def culocal(A, B):"
    assert inspect.getsource(module.culocal).startswith("def culocal(A, B):")


def test_a_switched_test_runs_its_kernel_through_overdubs_jit_and_each_call_is_counted(hook):
    module = importlib.import_module(LOCALMEM)
    plugin._calls[0] = 0
    result = unittest.TestResult()
    module.TestCudaLocalMem("test_local_array").run(result)
    assert result.wasSuccessful(), result.failures + result.errors
    assert plugin._calls[0] == 1


# --- the CPU target against numba-cuda's simulator ----------------------------------------------------------

CPU_SLICE = [
    "test_dispatcher",  # explicit signatures: numba's choice and conversions, for kernels and device functions
    "test_errors",  # launch configurations: numba-cuda's errors and messages
    "test_forall",
    "test_recursion",  # device functions calling themselves
    "test_sm",  # shared memory, records too
    "test_print",  # tuples, floats as numba-cuda prints them
    "test_array_args",
    "test_retrieve_autoconverted_arrays",  # cuda.In, cuda.InOut, extensions
]


def test_a_slice_of_numba_cudas_own_tests_passes_on_the_cpu_target_as_on_its_simulator(tmp_path):
    """The CPU side of the compatibility run (benchmarks/compat.py --target cpu; docs/compat.md has the whole
    suite's table): each test numba-cuda's simulator passes passes with the tests' imports switched to overdub,
    on the CPU target. (Where the native runner is not built, kernels that synchronize a block do not run on the
    CPU target -- a documented limit, a clear error -- and test_sm is left out.)"""
    from overdub.targets.cpu import runner

    files = [name for name in CPU_SLICE if runner.SYMBOLS is not None or name != "test_sm"]
    done = run_python(
        ROOT / "benchmarks" / "compat.py",
        "--target",
        "cpu",
        "--files",
        ",".join(files),
        "--jobs",
        "2",
        "--out",
        tmp_path,
        timeout=900,
    )
    result = json.loads((tmp_path / "compat.json").read_text())
    failures = [x for f in result["files"].values() for x in f["overdub_only_failures"]]
    assert failures == [], done.stderr[-3000:]
    assert result["totals"]["counted"] >= (50 if len(files) == len(CPU_SLICE) else 35)  # launching through overdub


# --- switching an installed library and its tests ---------------------------------------------------------

FAKELIB = {
    "fakelib/__init__.py": """
from numba import cuda
from .steps import add_one


def run(x):
    device = cuda.to_device(x)
    add_one[1, x.size](device)
    return device.copy_to_host()
""",
    "fakelib/steps.py": """
from numba import cuda
from numba.cuda import grid


@cuda.jit
def add_one(a):
    i = grid(1)
    if i < a.size:
        a[i] += 1
""",
    "tests/test_fakelib.py": """
import numpy as np
from numba import cuda

import fakelib
import overdub


def test_the_library_and_this_test_read_overdubs_cuda():
    assert cuda is overdub.cuda and fakelib.cuda is overdub.cuda
    assert fakelib.run(np.arange(3.0)).tolist() == [1.0, 2.0, 3.0]
""",
}


def test_a_library_and_its_tests_run_switched_by_the_command_their_files_unchanged(tmp_path):
    """``python -m overdub.switch --package fakelib --path tests -m pytest ...``: the library's modules and the
    tests import overdub's cuda, on the CPU target here; the files on disk keep numba's imports."""
    for name, source in FAKELIB.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(source)
    command = ("-m", "overdub.switch", "--package", "fakelib", "--path", "tests", "-m", "pytest")
    done = run_python(
        *command,
        "--assert=plain",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests",
        cwd=tmp_path,
        path=[tmp_path],
        env={"OVERDUB_TARGET": "cpu"},
        check=False,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "from numba import cuda" in (tmp_path / "fakelib" / "steps.py").read_text()
    (tmp_path / "main.py").write_text(
        "import numpy as np\nfrom numba import cuda\nimport fakelib\n"
        "print(cuda.__name__, fakelib.run(np.zeros(2)).tolist())\n"
    )
    script = run_python("-m", "overdub.switch", "--package", "fakelib", "main.py", cwd=tmp_path, path=[tmp_path])
    assert script.stdout.split("\n")[-2] == "overdub.cuda [1.0, 1.0]"


def test_installing_the_switch_after_the_library_was_imported_is_refused(tmp_path, monkeypatch):
    from overdub import switch

    (tmp_path / "already_here.py").write_text("from numba import cuda\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("already_here")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    try:
        with pytest.raises(ValueError, match="already_here is imported already, with numba-cuda's names"):
            switch.install("already_here")
    finally:
        sys.modules.pop("already_here", None)
