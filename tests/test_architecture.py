"""The shape of the package: imports flow one way, and what depends on numba internals says so."""

import ast
import pathlib

import overdub

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
        "overdub.cuda",  # the drop-in namespace, whose names are numba-cuda's
        "overdub.cuda.random",
        "overdub.cuda.cpu.ufuncs",  # numba-cuda's ufuncs on the CPU target: numba's CPU ufuncs
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
    for name in ("cpu", "cuda"):
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
