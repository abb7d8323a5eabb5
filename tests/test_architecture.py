"""The shape of the package: imports flow one way, and what depends on numba internals says so."""

import ast
import pathlib

import pytest

import overdub
from helpers import run_python

PACKAGE = pathlib.Path(overdub.__file__).resolve().parent


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _is_extension(module: str) -> bool:
    """A compiled extension of the package (its C source sits where its .py would)."""
    return PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".c").exists()


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: pathlib.Path, modules) -> set[str]:
    """The overdub modules ``name`` imports anywhere in its source (function-level imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:  # ``if TYPE_CHECKING:``: for the type checker, never run
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # `from . import world` imports the module overdub.world
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif not _is_extension(submodule):
                    found.add(base)
    return {m for m in found if m in modules and m != name}


def _cycle(graph) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for succ in sorted(graph[node]):
            if state.get(succ) == "open":
                return stack[stack.index(succ) :] + [succ]
            if succ not in state:
                found = visit(succ)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle_among_overdub_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # the package's public face imports everything; nothing below it may import it back
    importers_of_the_face = [name for name, deps in graph.items() if "overdub" in deps]
    assert importers_of_the_face == []
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_numba_is_reached_only_from_the_bridge_the_targets_and_the_modules_that_define_numba_types():
    allowed = {
        "overdub",  # the face: whether numba's simulator replaces numba.cuda, asked of numba's config at import
        "overdub.cuda",  # the drop-in namespace, whose names are numba-cuda's
        "overdub.cuda.random",
        "overdub.types",
        "overdub.resolve",  # OverdubCallType, numba's type of an Overdubbed callee
        "overdub.intrinsics",
        "overdub.arguments",
        "overdub.operators",
        "overdub.targets",
        "overdub.targets.cpu",
        "overdub.targets.cuda",
    }
    users = set()
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # types named for the type checker: numba is not reached
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(n == "numba" or n.startswith("numba.") for n in names):
                users.add(name)
    # the bridge's and the targets' modules may
    outside = {name for name in users - allowed if not name.startswith(("overdub.bridge.", "overdub.targets."))}
    assert outside == set(), sorted(outside)


def _design_layers() -> dict[str, int]:
    """The layer of each module in docs/design.md's module diagram (0 is the top line)."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text()
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    layers = {}
    for depth, line in enumerate(block.splitlines()):
        for word in line.split("  ")[0:3]:
            for token in word.split():
                if token.endswith(".py"):
                    name = "overdub." + token[:-3].replace("/", ".")
                    layers[name.removesuffix(".__init__") or "overdub"] = depth
    return layers


def test_each_module_imports_only_modules_below_it_in_the_design_diagram():
    modules = _modules()
    layers = _design_layers()
    assert set(layers) == set(modules), "docs/design.md's diagram must name every module"
    upward = [
        f"{name} imports {dep}"
        for name, path in modules.items()
        for dep in _imports(name, path, modules)
        if layers[dep] <= layers[name]
    ]
    assert upward == []


def test_each_target_provides_the_target_interface_and_its_name_is_what_users_pass():
    from overdub import targets

    members = [name for name in vars(targets.Target) if not name.startswith("_")]
    members += list(targets.Target.__annotations__)
    for name in ("cpu", "cuda", "cuda-mlir"):
        target = targets.get_target(name)
        assert target.name == name
        assert [m for m in members if not hasattr(target, m)] == []
    assert targets.get_target("cuda").label.startswith("cuda (sm_")


def test_each_launcher_provides_the_launcher_interface():
    from overdub import targets
    from overdub.targets import cpu, cuda

    members = [name for name in vars(targets.Launcher) if not name.startswith("_")]
    for launcher in (cpu.target.CPULauncher, cuda.CUDALauncher):
        assert [m for m in members if not hasattr(launcher, m)] == []


def _outside_targets() -> dict[str, pathlib.Path]:
    return {name: path for name, path in _modules().items() if not name.startswith("overdub.targets")}


def test_only_the_targets_and_the_drop_in_namespace_import_numba_cuda():
    # overdub.cuda is numba-cuda's namespace for a numba-cuda program: its names are numba-cuda's
    importers = []
    for name, path in _outside_targets().items():
        if name == "overdub.cuda" or name.startswith("overdub.cuda."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "numba.cuda" or n.startswith("numba.cuda.") or n.startswith("numba_cuda") for n in names):
                importers.append(name)
    assert importers == []


def test_outside_the_targets_no_module_compares_against_a_target_or_imports_one():
    from overdub.targets import registry

    names = {entry.name for entry in registry.entries()} | {entry.base.name for entry in registry.entries()}
    found = []
    for name, path in _outside_targets().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                constants = [c for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in names]
                found += [f"{name}:{node.lineno} compares against {c.value!r}" for c in constants]
            if isinstance(node, ast.Call):  # get_target("cpu"), od.cuda(..., target="cuda")
                given = [*node.args, *(keyword.value for keyword in node.keywords)]
                constants = [c for c in given if isinstance(c, ast.Constant) and c.value in names]
                found += [f"{name}:{node.lineno} passes {c.value!r}" for c in constants]
            if isinstance(node, ast.ImportFrom) and node.module and node.level:
                target_package = node.module.split(".")[:2] in (["targets", "cpu"], ["targets", "cuda"])
                from_targets = node.module == "targets" and {a.name for a in node.names} & {"cpu", "cuda"}
                if target_package or from_targets:
                    found.append(f"{name}:{node.lineno} imports a target's package")
    assert found == []


def test_no_module_below_the_front_imports_the_targets():
    # the front: the modules above the targets' face in the diagram (the public API, the launch, the calls)
    layers = _design_layers()
    modules = _modules()
    below = [
        f"{name} imports {dep}"
        for name, path in modules.items()
        if not name.startswith("overdub.targets") and layers[name] > layers["overdub.targets"]
        for dep in _imports(name, path, modules)
        if dep.startswith("overdub.targets")
    ]
    assert below == []


def test_a_registered_target_is_found_by_name_and_holds_its_memory():
    import numpy as np

    from overdub.targets import registry

    assert [entry.name for entry in registry.entries()][:3] == ["cpu", "cuda", "cuda-mlir"]
    assert registry.holding(np.zeros(1)).name == "cpu"

    class DeviceArray:
        __cuda_array_interface__ = None  # the protocol's attribute, read by name

    assert registry.holding(DeviceArray()).name == "cuda"  # device memory is the CUDA target's, either compiler
    assert registry.entry("cuda-mlir").base is registry.CUDA  # a compiler of the CUDA target: its context
    with pytest.raises(ValueError, match="unknown target 'tpu': use 'cpu', 'cuda' or 'cuda-mlir'"):
        registry.entry("tpu")
    with pytest.raises(ValueError, match="registered already"):
        registry.register("cpu", "CPU2", "overdub.targets.cpu", lambda value: True)


_TOY_TARGET = '''
"""A third target for the test: the CPU target's compiler under another name, with its own context."""
from overdub.targets.cpu.target import CPUTarget
from overdub.targets.registry import register

TOY = register("toy", "TOY", __name__, lambda value: False)


class ToyTarget(CPUTarget):
    name = "toy"
    base = TOY

    def _with_options(self, options):
        return ToyTarget(options, self.root)


TARGET = ToyTarget()


def current_target():
    return TARGET
'''

_USES_THE_TOY_TARGET = """
import numpy as np
import overdub as od
import toytarget

@od.function
def g(x):
    return x + 1

@toytarget.TOY.overdub(g)
def _(x):
    return x + 100

def kernel(out):
    out[0] = g(out[0])

out = np.zeros(1)
od.cuda(kernel, out, blocks=1, threads=1, target="toy")
od.cuda(kernel, out, blocks=1, threads=1, target="cpu")
assert out[0] == 101, out
assert "od.TOY" in repr(od.ALL) and od.targets.registry.holding(out).name == "cpu"
import pickle
assert pickle.loads(pickle.dumps(toytarget.TOY)) is toytarget.TOY  # its own context, by reference
print("ok")
"""


def test_a_third_target_is_one_package_and_a_registry_entry(tmp_path):
    # the registry is the process's: a subprocess, with the target's module on its path
    (tmp_path / "toytarget.py").write_text(_TOY_TARGET)
    assert run_python("-c", _USES_THE_TOY_TARGET, path=[tmp_path]).stdout.strip() == "ok"


def _mypy_coverage():
    """.ci/mypy_coverage.py, the measure CI prints, loaded as a module."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parent.parent / ".ci" / "mypy_coverage.py"
    spec = importlib.util.spec_from_file_location("mypy_coverage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_of_the_package_is_under_mypy_ignore_errors():
    assert [p for p in _mypy_coverage().ignored_patterns() if p.startswith("overdub")] == []


def test_mypy_strict_covers_at_least_90_percent_of_the_package_lines():
    strict_lines, total_lines, not_strict = _mypy_coverage().coverage()
    assert strict_lines >= 0.9 * total_lines, f"strict on {strict_lines} of {total_lines} lines; not: {not_strict}"
