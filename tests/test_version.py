"""The version is written in one place, ``overdub.__version__``; pyproject.toml reads it, and CHANGELOG.md has
a section for it."""

import re
import tomllib

import overdub
from helpers import ROOT


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "overdub.__version__"}


def test_the_changelog_has_a_section_for_the_version_and_the_unreleased_one_first():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert overdub.__version__ in headings
    assert headings.index(overdub.__version__) <= 1  # released, or the one before the unreleased section
