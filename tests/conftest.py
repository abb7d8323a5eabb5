import itertools
import textwrap
import types

import pytest

import overdub as od


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


# --- helpers for the CPU-target tests -------------------------------------------------------------------

_module_ids = itertools.count()


def unique_name(prefix: str) -> str:
    """A module name no other test uses (generic functions are keyed by module and qualified name)."""
    return f"{prefix}_{next(_module_ids)}"


class SourceModule(types.ModuleType):
    """A module built from source written to a real file, so that messages name ``file.py:LINE``.

    ``run(source)`` executes more source in the same namespace (a redefinition, a rebinding); each chunk
    gets its own file, so a redefinition's location differs from the original's. The module's namespace
    holds only what its source defines (the bookkeeping lives in the class).
    """

    _files: dict = {}      # module name -> the files its chunks were compiled from

    def __init__(self, name: str, directory):
        super().__init__(name)
        self._files[name] = (directory, [])

    def run(self, source: str) -> str:
        """Execute ``source`` in this module; returns the file name it was compiled from."""
        source = textwrap.dedent(source)
        directory, files = self._files[self.__name__]
        path = directory / f"{self.__name__}{'_' + str(len(files)) if files else ''}.py"
        path.write_text(source)
        files.append(path)
        exec(compile(source, str(path), "exec"), vars(self))
        return str(path)

    def line_of(self, text: str, chunk: int = 0) -> int:
        """The 1-based number of the first line containing ``text`` in the ``chunk``-th source run."""
        lines = self._files[self.__name__][1][chunk].read_text().splitlines()
        return next(i for i, line in enumerate(lines, 1) if text in line)

    @property
    def filename(self) -> str:
        """The base name of the file of the module's first source (what messages print)."""
        return self._files[self.__name__][1][0].name


@pytest.fixture
def make_module(tmp_path):
    """``make_module(source)``: a fresh module (unique name, so its generic functions are its own)."""
    def make(source: str, prefix: str = "odmod") -> SourceModule:
        module = SourceModule(unique_name(prefix), tmp_path)
        module.run(source)
        return module
    return make


def compiles() -> int:
    """Kernels compiled so far in this process (compare deltas)."""
    return od.stats()["compiles"]
