"""Helpers shared by the test files (imported as ``from helpers import ...``; tests/ is on ``sys.path``
because pytest's default ``prepend`` import mode inserts the directory of tests/conftest.py).

Pytest hooks and fixtures live in conftest.py; everything else the tests share lives here.
"""

import itertools
import textwrap
import types

import numpy as np

import overdub as od

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

    _files: dict = {}  # module name -> the files its chunks were compiled from

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


def compiles() -> int:
    """Kernels compiled so far in this process (compare deltas)."""
    return od.stats()["compiles"]


def run(kernel, *args, n=1, dtype=np.int64, **launch):
    """Launch ``kernel(out, *args)`` on a fresh zeroed ``out`` of ``n`` elements; return ``out`` as a list."""
    out = np.zeros(n, dtype=dtype)
    od.cuda(kernel, out, *args, **launch)
    return out.tolist()


def fresh(name="f"):
    """A new, empty generic function."""
    return od.GenericFunction(name)


SCALED = """
import overdub as od

scaled = od.Context("scaled", state=od.Float)

def h(x):
    return x

@scaled.overdub(h)
def _(x):
    return x * od.state()
"""
"""Module source of a context whose launch state scales what ``h`` returns: ``make_module(SCALED + kernel)``."""
