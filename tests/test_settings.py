"""The settings: every OVERDUB_* variable the library reads is declared in overdub/settings.py, read nowhere
else, documented in docs/settings.md's one table, and the disk cache keys on those that change code."""

import ast
import re

import pytest

from helpers import ROOT
from overdub import diskcache, settings

PACKAGE = ROOT / "overdub"


def _table() -> dict[str, dict[str, str]]:
    """docs/settings.md's table: variable -> its columns."""
    lines = (ROOT / "docs" / "settings.md").read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| variable |"))
    names = [cell.strip() for cell in lines[header].strip("|").split("|")]
    rows = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = dict(zip(names, (cell.strip() for cell in line.strip().strip("|").split("|"))))
        rows[cells["variable"].strip("`")] = cells
    return rows


def test_the_docs_table_lists_exactly_the_settings_the_library_declares():
    library = {name: row for name, row in _table().items() if row["read by"] == "overdub"}
    assert list(library) == [setting.name for setting in settings.SETTINGS]
    for setting in settings.SETTINGS:
        row = library[setting.name]
        assert row["when"] == setting.read
        assert row["default"] == setting.default
        assert row["code"] == ("yes" if setting.changes_code else "no")
        assert row["what it does"] == setting.doc


def test_the_other_rows_are_the_variables_tests_benchmarks_and_ci_read():
    others = {name for name, row in _table().items() if row["read by"] != "overdub"}
    sources = [*ROOT.glob("tests/*.py"), *ROOT.glob("benchmarks/**/*.py"), *ROOT.glob(".ci/**/*")]
    mentioned = set()
    for path in sources:
        if path.is_file() and path.name != "test_settings.py":  # this file names variables to test them
            mentioned |= set(re.findall(r"\bOVERDUB_[A-Z0-9_]+", path.read_text()))
    assert others == mentioned - {setting.name for setting in settings.SETTINGS}


def test_the_environment_is_read_only_in_settings_py():
    readers = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "settings.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


def test_settings_py_imports_nothing_of_overdub():
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    imported = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    imported += [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Import) and any(alias.name.startswith("overdub") for alias in node.names)
    ]
    assert imported == []


@pytest.mark.parametrize(
    "setting, text, message",
    [
        (settings.CPU_THREADS, "0", "OVERDUB_CPU_THREADS is '0': set it to a positive number"),
        (settings.CPU_THREADS, "two", "OVERDUB_CPU_THREADS is 'two'"),
        (settings.DEBUG, "yes", "OVERDUB_DEBUG is 'yes': set it to 1"),
        (settings.REROUTE, "sometimes", "OVERDUB_REROUTE is 'sometimes'"),
    ],
)
def test_a_bad_value_is_an_error_naming_the_variable(setting, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        setting.parse(text)


def test_the_values_of_each_setting_unset_and_set():
    assert settings.TARGET.parse(None) is None and settings.TARGET.parse("cpu") == "cpu"
    assert settings.CPU_THREADS.parse("3") == 3 and settings.CPU_THREADS.parse(None) >= 1
    assert settings.DEBUG.parse(None) is False and settings.DEBUG.parse("1") is True
    assert settings.CACHE.parse(None) is True and settings.CACHE.parse(" Off ") is False
    assert settings.CACHE_DIR.parse("/some/where") == "/some/where"
    assert settings.CACHE_SIZE.parse("2") == 2 * 2**20 and settings.CACHE_SIZE.parse("lots") == 2**30
    assert settings.REROUTE.parse(None) == "when-extended" and settings.REROUTE.parse("never") == "never"


def test_a_setting_read_at_each_use_follows_the_environment(monkeypatch):
    monkeypatch.setenv("OVERDUB_CACHE_SIZE", "5")
    assert settings.CACHE_SIZE.value() == 5 * 2**20
    monkeypatch.setenv("OVERDUB_CACHE_SIZE", "6")
    assert settings.CACHE_SIZE.value() == 6 * 2**20


def test_a_setting_read_once_keeps_its_first_value(monkeypatch):
    setting = settings.Setting("OVERDUB_TEST_ONCE", "`a`", lambda text: text or "a", "a test", read=settings.ONCE)
    monkeypatch.setenv("OVERDUB_TEST_ONCE", "b")
    assert setting.value() == "b"
    monkeypatch.setenv("OVERDUB_TEST_ONCE", "c")
    assert setting.value() == "b"


def _kernel(out):
    out[0] = 1.0


def test_the_disk_cache_key_changes_with_a_setting_that_changes_code(monkeypatch):
    from numba import types

    from overdub.job import CompileJob
    from overdub.targets import get_target

    target = get_target("cpu")
    job = CompileJob.of(_kernel, (types.float64[::1],), target.base.chain(target))
    assert [name for name, _ in settings.code_settings()] == ["OVERDUB_REROUTE"]
    keys = set()
    for mode in ("when-extended", "always", "never"):
        monkeypatch.setattr(settings.REROUTE, "process_value", mode)
        assert settings.code_settings() == [("OVERDUB_REROUTE", mode)]
        keys.add(diskcache._key(job))
    assert len(keys) == 3
