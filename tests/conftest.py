"""Pytest hooks and fixtures only; the helpers the tests share are in helpers.py."""
import pytest

from overdub.runtime import runtime

from helpers import SourceModule, unique_name


def _gpu_usable() -> bool:
    try:
        from numba import cuda
        return cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_usable():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def make_module(tmp_path):
    """``make_module(source)``: a fresh module (unique name, so its generic functions are its own)."""
    def make(source: str, prefix: str = "odmod") -> SourceModule:
        module = SourceModule(unique_name(prefix), tmp_path)
        module.run(source)
        return module
    return make


@pytest.fixture(autouse=True)
def fresh_runtime():
    """Each test starts with nothing compiled, no launch functions and zeroed counters."""
    runtime.reset()
    yield
