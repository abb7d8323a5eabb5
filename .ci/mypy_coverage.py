"""How much of the package mypy checks with full strictness, by lines.

Usage: python .ci/mypy_coverage.py. Reads pyproject.toml's ``[tool.mypy]`` overrides: a module named by an
override that sets anything but ``ignore_missing_imports`` (a relaxed flag, ``ignore_errors``) is not fully
strict, nor is a file with an inline ``# mypy:`` configuration comment. Prints the share of overdub/**/*.py's
lines in the modules that are, and the modules that are not.
tests/test_architecture.py imports it to hold the figure where it is.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "overdub"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _matches(pattern: str, module: str) -> bool:
    """mypy's override patterns: ``a.b`` names one module, ``a.b.*`` it and every module below it."""
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def overrides() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    result: list[dict[str, object]] = config["tool"]["mypy"].get("overrides", [])
    return result


def _patterns(override: dict[str, object]) -> list[str]:
    module = override["module"]
    return [module] if isinstance(module, str) else list(module)  # type: ignore[call-overload]


def relaxed_patterns() -> list[str]:
    """The module patterns of the overrides that lower strictness."""
    return [
        pattern
        for override in overrides()
        if set(override) - {"module", "ignore_missing_imports"}
        for pattern in _patterns(override)
    ]


def ignored_patterns() -> list[str]:
    """The module patterns of the overrides that silence mypy's errors altogether."""
    return [pattern for override in overrides() if override.get("ignore_errors") for pattern in _patterns(override)]


def coverage() -> tuple[int, int, list[str]]:
    """(lines in fully strict modules, all lines of the package, the modules not fully strict)."""
    relaxed = relaxed_patterns()
    strict_lines = total_lines = 0
    not_strict = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text().splitlines()
        lines = len(text)
        total_lines += lines
        name = module_name(path)
        inline = any(line.startswith("# mypy:") for line in text)
        if inline or any(_matches(pattern, name) for pattern in relaxed):
            not_strict.append(name)
        else:
            strict_lines += lines
    return strict_lines, total_lines, not_strict


if __name__ == "__main__":
    strict_lines, total_lines, not_strict = coverage()
    print(f"mypy strict: {strict_lines} of {total_lines} lines ({100 * strict_lines / total_lines:.1f}%)")
    for name in not_strict:
        print(f"  not fully strict: {name}")
