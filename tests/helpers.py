"""Helpers shared by the test files (imported as ``from helpers import ...``; tests/ is on ``sys.path``
because pytest's default ``prepend`` import mode inserts the directory of tests/conftest.py).

Pytest hooks and fixtures live in conftest.py; everything else the tests share lives here: module sources and
builders of them, the launch helper ``run``, and the one way a test runs Python in a fresh interpreter
(``run_python``; ``start_python`` and ``finish_python`` for several at once).
"""

import itertools
import json
import operator
import os
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numba import cuda

import overdub as od

ROOT = Path(od.__file__).resolve().parents[1]
"""The checkout the tests run: a fresh interpreter the tests start imports overdub from here."""

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


def methods(on: str = "Integer", **returns: str) -> str:
    """Module source defining, for each ``name=expression``, the method ``name(x: on) = expression`` of a
    generic function ``name``: ``methods(f="1", g="2")``, ``methods("Number", f="1")``."""
    return "import overdub as od\n" + "".join(
        f"\n\n@od.function\ndef {name}(x: od.{on}):\n    return {value}\n" for name, value in returns.items()
    )


def writes_seven(out):
    """A kernel writing 7 to each element of ``out``, one thread an element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 7


WRITES_ONE = "def kernel(out):\n    out[0] = 1\n"
"""Module source of a kernel that only writes 1 to out[0]: ``make_module(WRITES_ONE)``."""

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

NUMBA_CALLEES = """
import numba
from numba import cuda


@numba.njit
def twice(x):
    return 2 * x


@cuda.jit(device=True)
def plus_one(x):
    return x + 1
"""
"""Module source of numba's own callees a kernel may call: ``twice`` (``numba.njit``) and ``plus_one`` (a
``cuda.jit`` device function)."""


# --- fresh interpreters ---------------------------------------------------------------------------------------


def python_environment(*path, **variables) -> dict:
    """This process's environment for a fresh interpreter: the checkout, then the directories ``path``, first on
    its PYTHONPATH, then this process's PYTHONPATH made absolute (CI's relative ``.ci/no_extensions`` reaches an
    interpreter started in another folder too); ``variables`` set over it (a None value removes the variable)."""
    env = dict(os.environ)
    inherited = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, path), *inherited])
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def start_python(*argv, path=(), env=None, cwd=None) -> subprocess.Popen:
    """``python *argv`` (a script and its arguments, or ``"-c", source, ...``) started in a fresh interpreter with
    ``python_environment(*path, **env)``, its stdin, stdout and stderr pipes of text; ``finish_python`` waits."""
    return subprocess.Popen(
        [sys.executable, *map(str, argv)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_environment(*path, **(env or {})),
        cwd=cwd,
    )


def finish_python(process: subprocess.Popen, input=None, timeout=300, check=True) -> subprocess.CompletedProcess:
    """Wait for an interpreter ``start_python`` started (killed after ``timeout`` seconds); with ``check``, a
    non-zero exit fails the test with the command, the exit status and both streams' ends."""
    try:
        stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check and done.returncode != 0:
        command = " ".join(arg if len(arg) < 80 else arg[:76] + " ..." for arg in map(str, done.args))
        raise AssertionError(
            f"{command}\nexited with status {done.returncode}\n--- stderr ---\n{done.stderr[-4000:]}"
            f"\n--- stdout ---\n{done.stdout[-2000:]}"
        )
    return done


def run_python(*argv, path=(), env=None, cwd=None, input=None, timeout=300, check=True) -> subprocess.CompletedProcess:
    """The tests' one way to run Python in a fresh interpreter: ``start_python`` then ``finish_python``."""
    return finish_python(start_python(*argv, path=path, env=env, cwd=cwd), input=input, timeout=timeout, check=check)


def last_json(done: subprocess.CompletedProcess) -> Any:
    """The JSON record a fresh interpreter printed on its last line of output."""
    return json.loads(done.stdout.strip().splitlines()[-1])
