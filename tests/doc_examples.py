"""numba-cuda's documentation examples, run with ``from overdub import cuda`` as their only change.

    python tests/doc_examples.py [NAME ...]     # each example's result; tests/test_dropin_namespace.py runs them

The examples ship with numba-cuda (``numba/cuda/tests/doc_examples/test_*.py``, found through importlib
wherever it is installed): each is a unittest module whose test methods hold the example's code and its checks.
Each is loaded from its source with the example's imports rewritten -- ``from numba import cuda`` to ``from
overdub import cuda``, ``from numba.cuda[.X] import ...`` to ``from overdub.cuda[.X] import ...``
(:func:`overdub.switch.switched_source`, which benchmarks/compat.py's ``--switch import`` uses too) -- and
nothing else of the example changed. Around the examples is numba-cuda's test harness: ``numba.cuda.tests.support``
(``captured_stdout``, ``skip_unless_cffi``) is kept; ``numba.cuda.testing`` (``CUDATestCase`` and the
``skip_*`` decorators) is the one thing replaced (:data:`HARNESS`) -- its conditions ask numba-cuda's driver about
the GPU when the module is imported, and it needs ``filecheck`` to import at all -- by the same names asking
``overdub.cuda``: on the CPU target the device the examples see is the CPU target's, and on a GPU the answers
are numba-cuda's.

Examples that need CUDA C (``cuda.declare_device`` with a ``.cu`` file: test_ffi) cannot run on the CPU target:
:data:`NEED_A_GPU` says so, and they are skipped there.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
import unittest
from pathlib import Path

from overdub.switch import switched_source

__all__ = ["EXAMPLES", "NEED_A_GPU", "HARNESS", "directory", "rewritten", "load", "suite", "run"]

NEED_A_GPU = {"test_ffi": "CUDA C linked with cuda.declare_device(..., link='functions.cu') (and cffi)"}
"""The examples that cannot run on the CPU target, and why."""


def directory() -> Path:
    """Where the installed numba-cuda keeps its documentation examples."""
    spec = importlib.util.find_spec("numba.cuda.tests.doc_examples")
    assert spec is not None and spec.submodule_search_locations, "numba-cuda's doc examples are not installed"
    return Path(next(iter(spec.submodule_search_locations)))


EXAMPLES = sorted(path.stem for path in directory().glob("test_*.py"))
"""The examples' module names (test_vecadd, test_matmul, ...)."""

_HARNESS_MODULE = "overdub_doc_examples_harness"
# numba-cuda's test harness (not example code): its stand-in, answering for the device overdub.cuda uses
_HARNESS_IMPORT = re.compile(r"^(\s*)from numba\.cuda\.testing import", re.M)


def rewritten(source: str) -> str:
    """The example's source with its imports switched to overdub -- the one switch a user makes
    (:func:`overdub.switch.switched_source`) -- and the harness to :data:`HARNESS`."""
    return switched_source(_HARNESS_IMPORT.sub(rf"\1from {_HARNESS_MODULE} import", source))


def _harness() -> types.ModuleType:
    """The names of numba-cuda's ``numba.cuda.testing`` the examples use, with its conditions, asking
    ``overdub.cuda`` about the device. (numba-cuda's own module needs ``filecheck`` to import, and asks the
    driver at import.)"""
    from numba.cuda import config

    from overdub import cuda
    from overdub.targets import get_target

    harness = types.ModuleType(_HARNESS_MODULE)
    harness.CUDATestCase = unittest.TestCase
    harness.skip_on_cudasim = lambda reason: unittest.skipIf(config.ENABLE_CUDASIM, reason)
    harness.skip_on_standalone_numba_cuda = unittest.skipUnless(
        importlib.util.find_spec("numba") is not None, "requires base numba install"
    )

    def skip_unless_cc_60(fn):
        return unittest.skipUnless(cuda.get_current_device().compute_capability >= (6, 0), "requires cc >= 6.0")(fn)

    def skip_if_cudadevrt_missing(fn):
        """numba-cuda links cudadevrt into a kernel that synchronizes its grid; the CPU target needs none."""
        if get_target(None).name == "cpu":
            return fn
        from numba.cuda.cudadrv import libs

        try:
            libs.check_static_lib(libs.get_cudalib("cudadevrt", static=True))
        except FileNotFoundError:
            return unittest.skip("cudadevrt missing")(fn)
        return fn

    harness.skip_unless_cc_60 = skip_unless_cc_60
    harness.skip_if_cudadevrt_missing = skip_if_cudadevrt_missing
    return harness


HARNESS = _HARNESS_MODULE
"""The module name the examples' ``from numba.cuda.testing import ...`` is rewritten to."""


def load(name: str) -> types.ModuleType:
    """The example module ``name``, its imports rewritten, loaded under its own path (``__file__``: examples
    find their data beside it)."""
    sys.modules.setdefault(_HARNESS_MODULE, _harness())
    path = directory() / f"{name}.py"
    module = types.ModuleType(f"overdub_doc_example_{name}")
    module.__file__ = str(path)
    code = compile(rewritten(path.read_text()), str(path), "exec")
    exec(code, vars(module))
    return module


def suite(module: types.ModuleType) -> unittest.TestSuite:
    """The example's tests: its TestCase classes, and a module-level ``test_*`` function (test_matmul's)."""
    loader = unittest.TestLoader()
    tests = loader.loadTestsFromModule(module)
    for name, value in vars(module).items():
        if name.startswith("test") and isinstance(value, types.FunctionType):
            tests.addTest(unittest.FunctionTestCase(value))
    return tests


def run(name: str, stream=None) -> unittest.TestResult:
    """Run the example ``name`` (its every test) and return the unittest result."""
    runner = unittest.TextTestRunner(stream=stream, verbosity=2)
    return runner.run(suite(load(name)))


def _main(names: list[str]) -> int:
    from overdub.targets import get_target

    failed = 0
    for name in names or EXAMPLES:
        if name in NEED_A_GPU and get_target(None).name == "cpu":
            print(f"{name}: skipped on the CPU target: {NEED_A_GPU[name]}")
            continue
        result = run(name)
        outcome = "ok" if result.wasSuccessful() else "FAILED"
        print(f"{name}: {outcome} ({result.testsRun} tests, {len(result.skipped)} skipped)")
        failed += not result.wasSuccessful()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
