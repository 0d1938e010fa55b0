"""Docs that cannot drift: the option reference is generated, every option and command the docs name exists
and every one is documented, and every relative link resolves."""

import re
from pathlib import Path

import pytest

from pytest_dlperf import cli
from pytest_dlperf.options import OPTIONS, option_reference

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "benchmarks" / "README.md",
                *ROOT.glob("CONTRIBUTING.md"), *(ROOT / "benchmarks" / "gpu-runs").glob("*/README.md")])


def options() -> list[str]:
    return [option.flag for option in OPTIONS]


def test_the_option_reference_is_what_dlperf_options_prints(capsys):
    assert cli.main(["options"]) == 0
    printed = capsys.readouterr().out
    assert printed == option_reference()
    assert (ROOT / "docs" / "options.md").read_text() == printed, \
        "docs/options.md is out of date: run `dlperf options > docs/options.md`"
    assert all(f"`{flag}" in printed for flag in options())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_a_page_names_exists(page):
    known = set(options())
    named = set(re.findall(r"--dlperf-[a-z][a-z0-9-]*[a-z0-9]", page.read_text()))
    assert named <= known, f"{page.name} names options that do not exist: {sorted(named - known)}"


def test_every_option_is_documented_beside_the_reference():
    # docs/options.md lists them all; each is also explained where a user meets it (README or a docs page).
    text = "\n".join(p.read_text() for p in PAGES if p.name != "options.md")
    missing = [flag for flag in options() if flag not in text]
    assert not missing, f"options named nowhere but docs/options.md: {missing}"


def test_every_dlperf_command_the_pages_name_exists():
    parser = cli.build_parser()
    commands = next(a for a in parser._subparsers._group_actions).choices  # noqa: SLF001 - argparse's own
    text = "\n".join(p.read_text() for p in PAGES)
    named = set(re.findall(r"`dlperf ([a-z]+)", text))
    assert named <= set(commands), f"unknown dlperf commands in the docs: {sorted(named - set(commands))}"
    undocumented = [c for c in commands if f"dlperf {c}" not in text]
    assert not undocumented, f"dlperf commands no page names: {undocumented}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # not the examples in code blocks
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"
