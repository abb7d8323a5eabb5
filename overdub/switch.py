"""The one-import switch, as source text: a numba-cuda program's imports rewritten the way a user switches them.

A numba-cuda program moves to overdub by its imports alone (:mod:`overdub.cuda`): ``from numba import cuda``
becomes ``from overdub import cuda``, and ``from numba.cuda[.X] import ...`` becomes ``from overdub.cuda[.X]
import ...``. :func:`switched_source` makes exactly that change to a module's source, and nothing else, for the
harnesses that run numba-cuda's own code switched (``tests/doc_examples.py``, ``benchmarks/compat.py``):

    from numba import cuda                    ->  from overdub import cuda
    from numba import cuda, vectorize         ->  from overdub import cuda; from numba import vectorize
    from numba.cuda import int32, void        ->  from overdub.cuda import int32, void
    from numba.cuda.core.config import X      ->  from overdub.cuda.core.config import X
    from numba.cuda.testing import X          ->  (unchanged: numba-cuda's test harness, not the program)
    import numba.cuda                         ->  (unchanged: a module reference, ``numba.cuda.X`` in the code)

Each line stays on its line, so a module compiled from the switched source under its own file name keeps the
line numbers of its file (tracebacks, ``inspect.getsource``, numba's source locations).

An installed library that imports numba-cuda switches the same way, unchanged on disk: :func:`install` names
its packages (and directories, a test suite's), whose modules are then loaded from their sources switched, and
``python -m overdub.switch`` runs a script or a module (``pytest``) with them switched (docs/from-numba-cuda.md):

    python -m overdub.switch --package stumpy --path tests -m pytest --assert=plain tests/test_gpu_stump.py
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import runpy
import sys
from collections.abc import Callable, Iterable, Sequence
from types import CodeType, ModuleType

__all__ = ["HARNESS_MODULES", "SwitchedFinder", "install", "main", "switched_source", "uninstall"]

HARNESS_MODULES = ("testing", "tests")
"""The submodules of ``numba.cuda`` that are numba-cuda's test harness, never the program's: left as they are."""

# `from numba import a, cuda, b as c` on one line (a parenthesized list never names cuda in numba-cuda's code)
_FROM_NUMBA = re.compile(r"^([ \t]*)from numba import ([\w \t,]+?)[ \t]*(#.*)?$", re.M)
_HARNESS = "|".join(HARNESS_MODULES)
# `from numba.cuda[.X.Y] import` where no X, Y is a harness module
_FROM_NUMBA_CUDA = re.compile(rf"^([ \t]*)from numba\.cuda((?:\.(?!(?:{_HARNESS})\b)\w+)*) import\b", re.M)


_NUMBA_CUDA_MODULE = "cuda"  # numba's submodule that overdub's namespace replaces


def _from_numba(match: re.Match[str]) -> str:
    """``from numba import ...`` naming ``cuda``: ``cuda`` (under its alias, if any) from overdub, the rest from
    numba, on the same line."""
    indent, names, comment = match.groups()
    aliases = [name.strip() for name in names.split(",") if name.strip()]
    switched = [alias for alias in aliases if alias.split()[0] == _NUMBA_CUDA_MODULE]
    if not switched:
        return match.group(0)
    kept = [alias for alias in aliases if alias not in switched]
    imports = [f"from overdub import {', '.join(switched)}"]
    if kept:
        imports.append(f"from numba import {', '.join(kept)}")
    return indent + "; ".join(imports) + (f"  {comment}" if comment else "")


def switched_source(source: str) -> str:
    """``source`` with its imports of numba-cuda's namespace switched to overdub's, line for line."""
    source = _FROM_NUMBA.sub(_from_numba, source)
    return _FROM_NUMBA_CUDA.sub(r"\1from overdub.cuda\2 import", source)


# --- switching installed code: an import hook --------------------------------------------------------------


class SwitchedLoader(importlib.machinery.SourceFileLoader):
    """A source file's module compiled from its source with its imports switched (never from, nor into, the
    bytecode cache), under the file's own name: ``__file__``, tracebacks and line numbers are the file's.
    ``note(name, lines)``, where given, hears of each module switched and how many lines changed."""

    def __init__(self, fullname: str, path: str, note: Callable[[str, int], None] | None = None) -> None:
        super().__init__(fullname, path)
        self.note = note

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = importlib.util.decode_source(self.get_data(path))
        switched = switched_source(source)
        if self.note is not None:
            self.note(fullname, sum(a != b for a, b in zip(source.splitlines(), switched.splitlines())))
        return compile(switched, path, "exec", dont_inherit=True)


class SwitchedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules ``covers`` accepts (by name, or by the file the path finders find them in) where the
    path finders do, and loads each through :class:`SwitchedLoader`: its imports switched."""

    def __init__(self, covers: Callable[[str, str], bool], note: Callable[[str, int], None] | None = None) -> None:
        self.covers, self.note = covers, note

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or spec.origin is None:
            return None
        if not self.covers(fullname, spec.origin):
            return None
        spec.loader = SwitchedLoader(fullname, spec.origin, self.note)
        return spec


def _covering(packages: Iterable[str], paths: Iterable[str | os.PathLike[str]]) -> Callable[[str, str], bool]:
    names = tuple(packages)
    roots = tuple(os.path.join(os.path.realpath(p), "") for p in paths)

    def covers(fullname: str, origin: str) -> bool:
        if fullname.partition(".")[0] in ("overdub", "numba"):
            return False  # overdub's and numba's own modules are never switched
        if any(fullname == name or fullname.startswith(name + ".") for name in names):
            return True
        return bool(roots) and os.path.realpath(origin).startswith(roots)

    return covers


def install(*packages: str, paths: Iterable[str | os.PathLike[str]] = ()) -> SwitchedFinder:
    """Switch the installed packages ``packages`` (each with its subpackages), and the modules whose files lie
    under ``paths`` (a test suite's directory), to overdub: each of their modules imported from now on is loaded
    from its source with its imports of numba-cuda switched (:func:`switched_source`), the files unchanged. A
    ValueError where one of them is imported already (it holds numba-cuda's names): install before importing.
    Returns the import hook (:func:`uninstall` removes it)."""
    paths = tuple(paths)
    covers = _covering(packages, paths)
    imported = sorted(
        name
        for name, module in list(sys.modules.items())
        if getattr(module, "__file__", None) and covers(name, module.__file__)  # type: ignore[arg-type]  # checked just before
    )
    if imported:
        raise ValueError(
            f"overdub.switch.install: {imported[0]} is imported already, with numba-cuda's names: install the "
            f"switch before the first import of {', '.join(packages) or 'the modules under ' + str(paths[0])}"
        )
    finder = SwitchedFinder(covers)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    return finder


def uninstall(finder: SwitchedFinder) -> None:
    """Remove an import hook :func:`install` gave (modules it loaded stay as they are)."""
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


_USAGE = "python -m overdub.switch [--package PACKAGE]... [--path DIR]... (SCRIPT | -m MODULE) [ARGS]..."


def _parsed(argv: Sequence[str]) -> tuple[list[str], list[str], str | None, list[str]]:
    """(packages, paths, module or None, the script and its arguments or the module's arguments): the options
    before the script or ``-m MODULE``; everything after them is the program's."""
    packages: list[str] = []
    paths: list[str] = []
    args = list(argv)
    while args:
        option = args.pop(0)
        if option in ("--package", "--path", "-m") and not args:
            raise SystemExit(f"usage: {_USAGE}\n{option} needs a value")
        if option == "--package":
            packages.append(args.pop(0))
        elif option == "--path":
            paths.append(args.pop(0))
        elif option == "-m":
            return packages, paths, args.pop(0), args
        elif option in ("-h", "--help"):
            raise SystemExit(f"usage: {_USAGE}\n\n{main.__doc__}")
        else:
            return packages, paths, None, [option, *args]
    raise SystemExit(f"usage: {_USAGE}\ngive a script, or -m MODULE")


def main(argv: Sequence[str] | None = None) -> int:
    """Run a script or a module with the named packages and directories switched to overdub (the script
    itself too): ``--package P`` an installed package (with its subpackages), ``--path DIR`` the modules
    whose files lie under DIR (a test suite's). pytest: give it ``--assert=plain`` (its assertion rewriting
    would load the test modules before the switch)."""
    packages, paths, module, rest = _parsed(sys.argv[1:] if argv is None else argv)
    install(*packages, paths=paths)
    if module is not None:
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    script, *arguments = rest
    sys.argv = [script, *arguments]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    with open(script, encoding="utf-8") as file:  # the script itself, switched too
        code = compile(switched_source(file.read()), script, "exec", dont_inherit=True)
    main_module = ModuleType("__main__")
    main_module.__dict__.update(__file__=script, __builtins__=__builtins__)
    sys.modules["__main__"] = main_module
    exec(code, main_module.__dict__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
