"""The release's records agree (issue 51): the changelog's newest release is the package's version, and it names
the verdict rules that version judges by."""

import re
from pathlib import Path

import pytest_dlperf
from pytest_dlperf.gate.rules import VERDICT_RULES

ROOT = Path(__file__).resolve().parent.parent


def test_the_changelogs_newest_release_is_the_packages_version_with_its_verdict_rules():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text  # where the next release's lines gather
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)$", text, re.M)
    assert releases and releases[0][0] == pytest_dlperf.__version__, (releases[:1], pytest_dlperf.__version__)
    newest = text.split(f"## [{releases[0][0]}]")[1].split("\n## [")[0]
    assert f"`verdict_rules` {VERDICT_RULES}." in newest
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "pytest_dlperf.__version__"' in pyproject
