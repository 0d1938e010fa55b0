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
    assert f"`verdict_rules` ({rules.VERDICT_RULES})" in text  # the rules' version the page names is the code's
    assert len((ROOT / "docs" / "verdicts.md").read_bytes()) <= 15_000


def test_the_gate_changes_only_with_a_decision_on_its_rules_version(tmp_path):
    # Issue 51: a git pull could change what FAIL means, and nothing recorded when.  Every results document, saved
    # baseline and history night carries VERDICT_RULES; this test makes each change to the gate a decision on it.
    import shutil

    from pytest_dlperf.baseline import DEFAULT_TOLERANCE
    from pytest_dlperf.options import MAX_RUNS

    assert rules.fingerprint() == rules.FINGERPRINT, (
        "pytest_dlperf/gate/ changed: where a verdict can change, raise VERDICT_RULES and say what changed in "
        f"docs/verdicts.md; either way set FINGERPRINT = {rules.fingerprint()!r} in pytest_dlperf/gate/rules.py")
    assert (DEFAULT_TOLERANCE, MAX_RUNS) == (0.05, 10), "a verdict's default moved: raise VERDICT_RULES, then this"
    # A moved constant is caught; a message reworded is not.
    gate = tmp_path / "gate"
    shutil.copytree(Path(rules.__file__).parent, gate, ignore=shutil.ignore_patterns("__pycache__"))
    sequential = gate / "sequential.py"
    text = sequential.read_text()
    assert rules.fingerprint(gate) == rules.FINGERPRINT
    sequential.write_text(text.replace("\nREGRESSION_RUNS = 2\n", "\nREGRESSION_RUNS = 3\n"))
    assert rules.fingerprint(gate) != rules.FINGERPRINT
    sequential.write_text(text.replace("not saved as a baseline:", "left out of the baseline:"))
    assert "left out of" in sequential.read_text() and rules.fingerprint(gate) == rules.FINGERPRINT
