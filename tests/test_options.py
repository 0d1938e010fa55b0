"""The option table (issue 50): a short command line, the tuning knobs in the ini file, and removed options that
say what replaced them, in one line, before any case runs."""

from __future__ import annotations

import re

import pytest

from pytest_dlperf.options import OPTIONS, REMOVED, Options, option_reference

#: The most ``--dlperf-*`` options ``pytest --help`` may list (pytest-benchmark has 19).
MAX_VISIBLE = 35
VISIBLE = sorted(option.flag for option in OPTIONS if option.cli)
INI_ONLY = [option for option in OPTIONS if not option.cli]


def error_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stderr.lines if line.startswith("ERROR:")]


def test_pytest_help_lists_at_most_35_dlperf_options(pytester):
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0
    listed = sorted(set(re.findall(r"^  (--dlperf-[a-z0-9-]+)", result.stdout.str(), flags=re.M)))
    assert listed == VISIBLE
    assert len(listed) <= MAX_VISIBLE, listed
    hidden = [option.flag for option in INI_ONLY] + [removed.flag for removed in REMOVED]
    assert not set(hidden) & set(listed)


@pytest.mark.parametrize(("args", "replacement"), [
    (("--dlperf-confirm", "2"), "--dlperf-max-runs N"),
    (("--dlperf-no-fork-server",), "-o dlperf_start=fresh"),
    (("--dlperf-history-html", "site"), "dlperf history URL --html DIR"),
    (("--dlperf-history-html-link", "report=r.md"), "--link LABEL=PATTERN"),
], ids=lambda value: value[0] if isinstance(value, tuple) else None)
def test_a_removed_option_names_its_replacement_in_one_line(pytester, args, replacement):
    pytester.makepyfile("def test_never(): raise AssertionError('no test runs')")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert error_lines(result) == [f"ERROR: {args[0]} was removed: " + next(
        r.replacement for r in REMOVED if r.flag == args[0])]
    assert replacement in error_lines(result)[0]
    assert "no test runs" not in result.stdout.str()


def test_a_removed_option_in_the_ini_file_names_its_replacement(pytester):
    pytester.makeini("[pytest]\ndlperf_confirm = 2\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert error_lines(result) == ["ERROR: dlperf_confirm (ini) was removed: give --dlperf-max-runs N, the most runs "
                                   "of a case (--dlperf-confirm N was --dlperf-max-runs RUNS+N)"]


@pytest.mark.parametrize(("flag", "value"), [("--dlperf-max-interference", "0.5"), ("--dlperf-save-span", "off"),
                                             ("--dlperf-start", "fresh"), ("--dlperf-cpu-threads", "cores")])
def test_the_old_flag_of_an_ini_setting_says_where_it_went(pytester, flag, value):
    result = pytester.runpytest_inprocess(flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = "dlperf_" + flag[len("--dlperf-"):].replace("-", "_")
    assert error_lines(result) == [f"ERROR: {flag} is set in ini now: -o {name}={value} or {name} in pytest.ini "
                                   "(docs/options.md)"]


def test_every_ini_setting_refuses_its_old_flag_in_the_same_words():
    for option in INI_ONLY:
        assert option.refusal("7") == (f"{option.flag} is set in ini now: -o {option.dest}=7 or {option.dest} in "
                                       "pytest.ini (docs/options.md)")


def test_an_ini_setting_given_with_dash_o_reaches_the_options(pytester):
    pytester.makeini("[pytest]\ndlperf_save_span = 30\ndlperf_repeats = 4\n")
    config = pytester.parseconfig("-o", "dlperf_max_interference=12", "-o", "dlperf_start=fresh",
                                  "-o", "dlperf_repeats=3", "-o", "dlperf_cpu_threads=cores")
    opts = Options(config)
    assert opts.max_interference == 12.0 and opts.start == "fresh" and opts.cpu_threads == "cores"
    assert opts.repeats == 3  # -o wins over the ini file
    assert opts.save_span == 30.0  # the ini file
    assert opts.no_fork_server is True  # derived from dlperf_start
    assert opts.history_html is None and opts.history_html_links == []


def test_a_bad_ini_setting_is_named_by_its_ini_name(pytester):
    from pytest_dlperf.cases import OptionError

    with pytest.raises(OptionError, match=r"^dlperf_save_span: 'soon' is not a number$"):
        Options(pytester.parseconfig("-o", "dlperf_save_span=soon"))


def test_the_reference_has_the_command_line_the_ini_settings_and_the_removed_options():
    text = option_reference()
    command_line, rest = text.split("## Ini settings")
    ini, removed = rest.split("## Removed options")
    assert all(f"`{flag}" in command_line for flag in VISIBLE)
    assert all(f"| `{option.dest}` |" in ini and option.flag not in text for option in INI_ONLY)
    assert all(f"- `{entry.flag}`: {entry.replacement}." in removed for entry in REMOVED)
