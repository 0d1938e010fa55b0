"""The README's table of verdicts is the gate's own (pytest_dlperf.gate.rules.readme_table): a rule or a figure
that changes in the code without the README fails here, and the rules docs/verdicts.md counts are the code's."""

import re
from pathlib import Path

from pytest_dlperf.gate import rules

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_verdict_table_is_the_codes():
    readme = (ROOT / "README.md").read_text()
    assert rules.readme_table() in readme, (
        "README.md's verdict table differs from pytest_dlperf.gate.rules.readme_table(): paste its output")


def test_the_rules_docs_verdicts_counts_are_the_codes():
    text = (ROOT / "docs" / "verdicts.md").read_text()
    counted = re.search(r"The verdict has (\d+) rules", text)
    assert counted and int(counted[1]) == len(rules.RULES)
    assert len((ROOT / "docs" / "verdicts.md").read_bytes()) <= 15_000
