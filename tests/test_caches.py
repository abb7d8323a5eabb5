"""Every module-level cache of the package is registered with the runtime, beside its definition, and
``runtime.reset()`` empties each one not kept across resets (those say why)."""

import ast
import importlib
import pathlib

import numpy as np
from numba import cuda

import overdub as od
from overdub.runtime import runtime

PACKAGE = pathlib.Path(od.__file__).resolve().parent

_CONTAINERS = {"dict", "list", "set", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "OrderedDict"}
_CACHING_DECORATORS = {"lru_cache", "cache"}


def _name(node) -> str:
    """The last name of ``f``, ``a.f`` or ``a.f(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _is_empty_container(value) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set):
        return not (getattr(value, "keys", None) or getattr(value, "elts", None))
    return isinstance(value, ast.Call) and _name(value) in _CONTAINERS and not value.args


def _module_caches(path: pathlib.Path) -> list[str]:
    """The module-level caches of a module: names bound at module level to an empty container that the code
    fills later, and functions under a functools cache."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _is_empty_container(node.value):
                found += [target.id for target in targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.FunctionDef) and any(_name(d) in _CACHING_DECORATORS for d in node.decorator_list):
            found.append(node.name)
    return found


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_scan_finds_containers_and_functools_caches(tmp_path):
    path = tmp_path / "example.py"
    path.write_text(
        "import functools, weakref\n_a = {}\n_b: dict = {}\n_c = weakref.WeakKeyDictionary()\n_D = {1: 2}\n"
        "@functools.lru_cache(maxsize=None)\ndef f(): pass\n@functools.cache\ndef g(): pass\ndef h(): pass\n"
    )
    assert _module_caches(path) == ["_a", "_b", "_c", "f", "g"]


def test_every_module_level_cache_of_the_package_is_registered_with_the_runtime():
    modules = {path: importlib.import_module(_module_name(path)) for path in sorted(PACKAGE.rglob("*.py"))}
    registered = {cache.name: cache for cache in runtime.caches()}  # after every import: each registers its own
    unregistered = []
    for path, module in modules.items():
        for name in _module_caches(path):
            entry = registered.get(f"{module.__name__}.{name}")
            if entry is None or entry.cache is not getattr(module, name):
                unregistered.append(f"{module.__name__}.{name}")
    assert unregistered == []


def test_each_registered_cache_is_a_variable_of_its_module_and_a_kept_one_says_why():
    for cache in runtime.caches():
        module, _, name = cache.name.rpartition(".")
        assert hasattr(importlib.import_module(module), name), cache.name
        assert (cache.clear is None) == bool(cache.kept), cache.name


def _size(cache) -> int:
    info = getattr(cache, "cache_info", None)
    return info().currsize if info is not None else len(cache)


def test_reset_empties_every_cache_not_kept_and_keeps_the_others():
    @od.struct
    class Pair:
        a: float
        b: od.int32

    def kernel(out, p):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = p.a + p.b

    out = np.zeros(4)
    od.cuda(kernel, out, Pair(1.5, 2), threads=4, target="cpu")
    assert out.tolist() == [3.5] * 4
    sizes = {cache.name: _size(cache.cache) for cache in runtime.caches() if cache.cache is not None}
    filled = [name for name, size in sizes.items() if size]
    clearable = {cache.name for cache in runtime.caches() if cache.clear is not None}
    assert len(set(filled) & clearable) >= 4  # the launch filled some of them
    runtime.reset()
    after = {cache.name: _size(cache.cache) for cache in runtime.caches() if cache.cache is not None}
    assert {name: size for name, size in after.items() if name in clearable and size} == {}
    assert {name for name in filled if name not in clearable and after[name] == sizes[name]} == {
        name for name in filled if name not in clearable
    }
