"""Post-import hooks: ``hook(module)`` run once a module is imported -- at once, where it already is.

What :func:`overdub.when_imported` is, and how overdub gives numba-cuda's names their meaning on the CPU target
without importing numba-cuda, which takes longer to import than numba itself: the registrations wait for
the program (or the CUDA target) to import it.

A finder first on ``sys.meta_path`` takes part only in the imports of modules that have hooks waiting: it
finds the module's spec with the finders after it, as the import system would, and wraps the spec's loader;
the wrapper runs the module's code with the real loader, then the hooks (PEP 369's design, as wrapt's
post-import hooks, whose import brings asyncio along, implement it). The module is fully executed when its
hooks run, and another thread importing it waits for them as it waits for the module's code.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import types as pytypes
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec

from .runtime import runtime

__all__ = ["when_imported", "ENGINE_MODULES"]

ENGINE_MODULES = (
    "multiprocessing.reduction",
    "multiprocessing.pool",
    "concurrent.futures.process",
    "distributed.worker",
    "cloudpickle.cloudpickle",
    "ray.cloudpickle.cloudpickle",
    "distributed.protocol.pickle",
    "dask.tokenize",
    "dask.delayed",
    "ray.remote_function",
    "ray.actor",
)
"""The modules of the engines that ship work to other processes whose import installs overdub's hook in them
(:mod:`overdub.engines`, imported then: ``overdub/__init__.py`` registers the hooks)."""

Hook = Callable[[pytypes.ModuleType], object]

_waiting: dict[str, list[Hook]] = {}  # module name -> the hooks its import runs
runtime.register_cache(f"{__name__}._waiting", _waiting, kept="hooks waiting for their module: definitions")
_lock = threading.Lock()
_finding = threading.local()  # .names: the modules this thread's finder is finding a spec for (re-entry)


def when_imported(name: str, hook: Hook) -> None:
    """Run ``hook(module)`` once the module ``name`` is imported; now, if it is -- after its code, if it is
    importing now with hooks waiting (a hook of another module, run meanwhile, added this one)."""
    with _lock:
        module = sys.modules.get(name)
        if module is None or name in _waiting:  # (the waiting hooks run, and leave, when its code has run)
            module = None
            _waiting.setdefault(name, []).append(hook)
            if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
                sys.meta_path.insert(0, _Finder())
    if module is not None:
        hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the spec of a module with hooks waiting through the other finders, and wraps its loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: pytypes.ModuleType | None = None
    ) -> ModuleSpec | None:
        names = _finding.__dict__.setdefault("names", set())
        if fullname not in _waiting or fullname in names:  # a finder after this one may ask all of them again
            return None
        names.add(fullname)
        try:
            spec = _spec_from_others(self, fullname, path, target)
        finally:
            names.discard(fullname)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _HookedLoader(spec.loader)
        return spec


def _spec_from_others(
    finder: _Finder, fullname: str, path: Sequence[str] | None, target: pytypes.ModuleType | None
) -> ModuleSpec | None:
    for other in list(sys.meta_path):
        find = getattr(other, "find_spec", None)
        if other is finder or find is None:
            continue
        spec: ModuleSpec | None = find(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _HookedLoader(importlib.abc.Loader):
    """A module's loader that runs the module's hooks after its code; the module keeps its own loader."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> object:  # get_code, is_package, get_resource_reader...: the loader's
        return getattr(self.loader, name)

    def create_module(self, spec: ModuleSpec) -> pytypes.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: pytypes.ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        name = module.__name__
        module = sys.modules.get(name, module)  # (a module may put another object in its place)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:  # bound to its parent now, as the import system does next: a hook's imports
            setattr(sys.modules[parent], child, module)  # may run code that reads it there (numba.cuda.fp16)
        with _lock:
            hooks = _waiting.pop(name, [])
        for hook in hooks:
            hook(module)
