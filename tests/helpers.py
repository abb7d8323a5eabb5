"""Helpers shared by the test files (imported as ``from helpers import ...``; tests/ is on ``sys.path``
because pytest's default ``prepend`` import mode inserts the directory of tests/conftest.py).

Pytest hooks and fixtures live in conftest.py; everything else the tests share lives here.
"""

import itertools
import operator
import textwrap
import threading
import types
from typing import ClassVar

import numpy as np
from numba import cuda

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

    _files: ClassVar[dict] = {}  # module name -> the files its chunks were compiled from

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


def run(kernel, *args, n=1, dtype=np.int64, target=None, **launch):
    """Launch ``kernel(out, *args)`` on a fresh zeroed ``out`` of ``n`` elements; return ``out`` as a list.

    The one launch helper of the tests. ``target`` is "cpu", "cuda" or None (the machine's default); for
    "cuda", ``out`` is a cupy array. A test that passes arrays of its own calls ``od.cuda(..., target=...)``.
    """
    if target == "cuda":
        import cupy

        out = cupy.zeros(n, dtype=dtype)
        od.cuda(kernel, out, *args, target=target, **launch)
        return out.get().tolist()
    out = np.zeros(n, dtype=dtype)
    od.cuda(kernel, out, *args, target=target, **launch)
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


def method_f(returns: str) -> str:
    """Module source defining the method ``f(x: Integer) = <returns>`` of a generic function ``f``; run again in
    the same module (``m.run(method_f("2"))``), it redefines that method."""
    return f"import overdub as od\n\n\n@od.function\ndef f(x: od.Integer):\n    return {returns}\n"


CALLS_F = """

def kernel(out):
    out[0] = f(0)
"""
"""Module source of a kernel writing ``f(0)`` to out[0]: ``make_module(method_f("1") + CALLS_F)``."""

CALLS_F_OF_X = """

def kernel(out, x):
    out[0] = f(x)
"""
"""Module source of a kernel writing ``f(x)`` to out[0]: ``make_module(method_f("x") + CALLS_F_OF_X)``."""

TWO_ARGS = """
import overdub as od


@od.function
def h(x: od.Integer, y: od.Number):
    return 1


@od.function
def h(x: od.Number, y: od.Integer):
    return 2


@od.function
def h(x: od.Float, y: od.Float):
    return 3


def kernel(out, x, y):
    out[0] = h(x, y)
"""
"""Module source of a kernel calling ``h(x, y)``, whose methods make ``h(int, int)`` ambiguous."""


def counting_reads(name: str, element) -> od.Context:
    """A context whose launch state, an int64 array, counts in ``state[0]`` (an atomic add) every read ``a[i]``
    of a 1-d array of ``element``; the read itself runs one context down, as always."""
    counting = od.Context(name, state=od.Array[od.int64, 1])

    @counting.overdub(operator.getitem)
    def _counted(a: od.Array[element, 1], i: od.Integer):
        cuda.atomic.add(od.state(), 0, 1)
        return a[i]

    return counting


SEED = """
import overdub as od


@od.function
def doit(ptr):
    od.unsafe_store(ptr, 0)
    print(1)


def kernel(ptr):
    doit(ptr)
"""
"""Module source of the seed scenario (examples/seed_redefinition.py): a kernel whose callee stores 0 and prints
1; ``m.run(SEED.replace("print(1)", "print(2)").split("def kernel")[0])`` redefines the callee to print 2."""


def in_threads(work, arguments) -> list:
    """Call ``work(argument)`` for each of ``arguments``, each on a host thread of its own, all started before
    any is joined; return the exceptions they raised (``[]`` where none did)."""
    errors = []

    def guarded(argument):
        try:
            work(argument)
        except BaseException as error:  # any error is the failure
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


CALLS_HELPER = """
def helper(x):
    return x + 1


def kernel(out):
    out[0] = helper(10)
"""
"""Module source of a kernel writing ``helper(10)``, 11, to out[0], where ``helper`` is a plain function."""
