"""Pytest hooks and fixtures only; the helpers the tests share are in helpers.py."""

import os
import textwrap

import pytest

from helpers import SourceModule, unique_name
from overdub.runtime import runtime


def _gpu_usable() -> bool:
    try:
        from numba import cuda

        return cuda.is_available()
    except Exception:
        return False


def _skips() -> dict:
    """Marker -> the skip a test with it gets here (None: it runs). ``soak`` and ``model`` tests run in CI's full
    run (OVERDUB_FULL=1, .ci/run); ``slow`` ones, the same for minutes to hours, with OVERDUB_SLOW=1, which runs
    the ``soak`` and ``model`` ones too."""
    slow = bool(os.environ.get("OVERDUB_SLOW"))
    full = slow or bool(os.environ.get("OVERDUB_FULL"))
    return {
        "gpu": None if _gpu_usable() else pytest.mark.skip(reason="no usable CUDA GPU on this machine"),
        "slow": None if slow else pytest.mark.skip(reason="slow: set OVERDUB_SLOW=1"),
        "soak": None if full else pytest.mark.skip(reason="soak: set OVERDUB_FULL=1 (CI's full run)"),
        "model": None if full else pytest.mark.skip(reason="model: set OVERDUB_FULL=1 (CI's full run)"),
    }


def pytest_collection_modifyitems(config, items):
    skips = {marker: skip for marker, skip in _skips().items() if skip is not None}
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def cupy():
    """The cupy module, for GPU tests' device arrays; the test is skipped where cupy is not installed."""
    return pytest.importorskip("cupy")


def _mlir_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("numba_cuda_mlir") is not None  # not imported: it loads its own LLVM


@pytest.fixture(
    params=[
        "numba-cuda",
        pytest.param(
            "numba-cuda-mlir",
            marks=pytest.mark.skipif(not _mlir_installed(), reason="numba-cuda-mlir not installed: overdub[mlir]"),
        ),
    ]
)
def cuda_compiler(request, monkeypatch):
    """Each CUDA compiler in turn as what ``target="cuda"`` compiles with (``OVERDUB_CUDA_COMPILER``): a test
    taking it runs on numba-cuda and on numba-cuda-mlir (the cuda-mlir target)."""
    from overdub import settings

    monkeypatch.setattr(settings.CUDA_COMPILER, "process_value", request.param)
    return request.param


@pytest.fixture
def four_workers():
    """The CPU target's blocks run on four threads (more than a small machine's cores, so that they interleave for
    real); used by the test files of kernels that synchronize."""
    from overdub.targets import cpu

    saved = cpu.TARGET.workers
    cpu.TARGET.workers = 4
    yield
    cpu.TARGET.workers = saved


@pytest.fixture
def make_module(tmp_path):
    """``make_module(*sources)``: a fresh module (unique name, so its generic functions are its own) of the
    sources, each dedented, one after another (a shared source, then a test's own)."""

    def make(*sources: str, prefix: str = "odmod") -> SourceModule:
        module = SourceModule(unique_name(prefix), tmp_path)
        module.run("\n".join(textwrap.dedent(source) for source in sources))
        return module

    return make


@pytest.fixture(autouse=True)
def fresh_runtime(tmp_path_factory, monkeypatch):
    """Each test starts with nothing compiled, no launch functions, zeroed counters and an empty disk cache
    of its own (the suite never writes to the user's)."""
    monkeypatch.setenv("OVERDUB_CACHE_DIR", str(tmp_path_factory.mktemp("overdub-cache")))
    monkeypatch.delenv("OVERDUB_CACHE", raising=False)
    runtime.reset()
    yield
