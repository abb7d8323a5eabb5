"""Whose code a module is: an installed package's, the standard library's or overdub's -- the same in every
process at the versions the disk cache's key holds -- or the user's own, which is digested by content and
travels by value.

Two questions, each answered from the module's file and cached per file (``realpath`` asks the file system for
every link on the path): :func:`is_library_module` -- any installed package, the standard library, overdub --
decides what ships by value to other processes (:mod:`overdub.byvalue`, :mod:`overdub.travel`) and what a
fact may name rather than digest; :func:`is_versioned_module` -- only the packages whose versions the cache key
holds -- decides which objects a digest may know by name alone (:mod:`overdub.embedded`). ``__main__`` is the
user's code even where a worker's main module is an installed package's file. :data:`SHIPPED` marks the
namespace of a def that arrived by value, whose globals are its own rather than its module's.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig

from .runtime import runtime

__all__ = ["SHIPPED", "is_library_module", "is_versioned_module"]

SHIPPED = "__overdub_shipped__"  # the mark of the namespace of a def that arrived by value (overdub.travel)

# the standard library's and site-packages' directories, resolved once (get_paths and realpath are not cheap)
_KEYS = ("stdlib", "platstdlib", "purelib", "platlib")
_PATHS = {k: os.path.realpath(path) + os.sep for k, path in sysconfig.get_paths().items() if k in _KEYS}
_LIBRARY_PATHS = tuple(sorted(set(_PATHS.values())))


def is_library_module(name: object) -> bool:
    """Is ``name`` a module of an installed package, the standard library or overdub (whose versions the
    cache key holds), rather than the user's own code?"""
    if not isinstance(name, str) or name in ("__main__", "__mp_main__"):
        return False  # the program's own code -- even where a worker's __main__ is an installed package's file
    top = name.split(".")[0]
    if top in ("overdub", "builtins") or top in sys.builtin_module_names:
        return True
    file = getattr(sys.modules.get(name) or sys.modules.get(top), "__file__", None)
    return isinstance(file, str) and _is_library_file(file)


@functools.lru_cache(maxsize=4096)
def _is_library_file(file: str) -> bool:
    """Is ``file`` under an installed package's or the standard library's directory -- site-packages, or a
    directory a package was installed into with its metadata beside it (``pip install --target``)?
    (``realpath`` asks the file system for every link on the path: once per file.)"""
    path = os.path.realpath(file)
    return path.startswith(_LIBRARY_PATHS) or _installed_with_metadata(path)


def _installed_with_metadata(path: str) -> bool:
    """Is ``path`` a module of a distribution whose ``*.dist-info`` (or ``*.egg-info``) lies beside its
    top-level package, as pip leaves it in any directory it installs into?"""
    directory, top = os.path.dirname(path), os.path.splitext(os.path.basename(path))[0]
    while os.path.exists(os.path.join(directory, "__init__.py")):  # up to the directory on sys.path
        directory, top = os.path.dirname(directory), os.path.basename(directory)
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    prefix = top.lower().replace("-", "_") + "-"
    return any(n.lower().startswith(prefix) and n.endswith((".dist-info", ".egg-info")) for n in names)


runtime.register_cache(f"{__name__}._is_library_file", _is_library_file)

_VERSIONED = frozenset({"overdub", "numba", "numba_cuda", "llvmlite", "numpy", "builtins"})
_SITE_PATHS = tuple(sorted({_PATHS[k] for k in ("purelib", "platlib")}))
_STDLIB_PATHS = tuple(sorted({_PATHS[k] for k in ("stdlib", "platstdlib")}))


def is_versioned_module(name: object) -> bool:
    """Is ``name`` a module whose version the cache key holds -- overdub (by its source), numba, numba-cuda,
    llvmlite, numpy, Python's standard library -- so that its objects may be known by name? (Another
    installed package is not: its code and values are digested where compiled code embeds them.)"""
    if not isinstance(name, str) or name in ("__main__", "__mp_main__"):
        return False  # the program's own code -- even where a worker's __main__ is an installed package's file
    top = name.split(".")[0]
    if top in _VERSIONED or top in sys.builtin_module_names:
        return True
    file = getattr(sys.modules.get(name) or sys.modules.get(top), "__file__", None)
    return isinstance(file, str) and _is_stdlib_file(file)


@functools.lru_cache(maxsize=4096)
def _is_stdlib_file(file: str) -> bool:
    path = os.path.realpath(file)
    return path.startswith(_STDLIB_PATHS) and not path.startswith(_SITE_PATHS)


runtime.register_cache(f"{__name__}._is_stdlib_file", _is_stdlib_file)
