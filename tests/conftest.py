"""Pytest hooks and fixtures only; the helpers the tests share are in helpers.py."""

import os

import pytest

from helpers import SourceModule, unique_name
from overdub.runtime import runtime


def _gpu_usable() -> bool:
    try:
        from numba import cuda

        return cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    skip_gpu = None if _gpu_usable() else pytest.mark.skip(reason="no usable CUDA GPU on this machine")
    skip_slow = None if os.environ.get("OVERDUB_SLOW") else pytest.mark.skip(reason="slow: set OVERDUB_SLOW=1")
    for item in items:
        if "gpu" in item.keywords and skip_gpu:
            item.add_marker(skip_gpu)
        if "slow" in item.keywords and skip_slow:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def cupy():
    """The cupy module, for GPU tests' device arrays; the test is skipped where cupy is not installed."""
    return pytest.importorskip("cupy")


@pytest.fixture
def make_module(tmp_path):
    """``make_module(source)``: a fresh module (unique name, so its generic functions are its own)."""

    def make(source: str, prefix: str = "odmod") -> SourceModule:
        module = SourceModule(unique_name(prefix), tmp_path)
        module.run(source)
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
