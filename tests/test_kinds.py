"""The case pipeline (issue 50): a kind is two methods, a judgement is a frozen value, and its words are made in one
place.

* a kind of the user's own, registered from a conftest with two methods, gets a verdict, a results entry, test
  properties and report rows with no file of the package touched;
* the session's policies make new judgements, never edit a message;
* no module but :mod:`pytest_dlperf.reporting.verdicts` splits, joins or edits a verdict's words (a search of the
  code);
* a case's baseline entry goes through at most five rooms of the controller, whichever its kind.
"""

from __future__ import annotations

import ast
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from pytest_dlperf.gate.policy import Policy, refuse, settle
from pytest_dlperf.gate.rules import VERDICT_RULES
from pytest_dlperf.reporting.verdicts import REASON, render
from pytest_dlperf.results.judgement import Gate, GateName, Judgement, Reason, Status, Why

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_dlperf"

TOY = '''
import time

from torch import nn

from pytest_dlperf import register_model
from pytest_dlperf.controller.kinds import Measurement, register_kind
from pytest_dlperf.gate.stats import summarize
from pytest_dlperf.results.judgement import Gate, GateName, Judgement, Reason, Status, Why


@register_model("toy", task="regression", batch_size=8, defaults={"in_features": 4})
def toy(settings):
    return nn.Linear(4, 1)


class Loop:
    """A kind of case that times a Python loop: its own measure, its own verdict."""

    def measure(self, plan, runner):
        rates, total = [], 0
        for _ in range(5):
            started = time.perf_counter()
            total = sum(range(20000))
            rates.append(1.0 / (time.perf_counter() - started))
        stats = summarize(rates)
        return Measurement("loops/s", throughput=stats.median, stats=stats.to_dict(), value=total)

    def judge(self, measurement, reference, policy):
        fast = measurement.value == sum(range(20000))
        status = Status.PASS if fast else Status.FAIL
        return Judgement(status, (Reason("loop-case: the loop summed right", Why.HEADLINE, status),
                                  Reason("timed in the conftest's own kind")),
                         (Gate(GateName.THROUGHPUT, status),))


register_kind("loop", Loop(), lambda case, spec: case.model == "toy")
'''


def test_a_kind_of_the_users_own_gets_a_verdict_results_properties_and_report_rows(dlperf):
    dlperf.pytester.makeconftest(TOY)
    result = dlperf.run("--dlperf-model", "toy", "--dlperf-json", "results.json", "--dlperf-report", "report.md",
                        "--junitxml", "junit.xml", "-rA")
    result.assert_outcomes(passed=1)
    document = dlperf.results()
    schema = json.loads((PACKAGE / "schemas" / "results.schema.json").read_text())
    jsonschema.validate(document, schema)
    assert document["verdict_rules"] == VERDICT_RULES  # the rules its verdicts were judged by (issue 51)
    (case,) = document["cases"]
    assert case["verdict"] == "pass" and case["throughput_verdict"] == "pass"
    assert case["message"] == f"PASS loop-case: the loop summed right{REASON}timed in the conftest's own kind"
    assert case["judgement"]["gates"] == {"throughput": "pass"} and case["unit"] == "loops/s"
    properties = {p.get("name"): p.get("value") for p in ET.parse(dlperf.path / "junit.xml").iter("property")}
    assert properties["dlperf_verdict"] == "pass" and properties["dlperf_unit"] == "loops/s"
    assert float(properties["dlperf_throughput"]) > 0
    report = (dlperf.path / "report.md").read_text()
    assert f"| {case['id']} | pass | PASS loop-case: the loop summed right |" in report
    result.stdout.fnmatch_lines(["*dlperf: 1 pass*"])


def test_policies_make_new_judgements_and_the_words_follow_them():
    undecided = Judgement(Status.INCONCLUSIVE, (Reason("c: 900 img/s", Why.HEADLINE, Status.INCONCLUSIVE),
                                                Reason("undecided after 10 runs", Why.EVIDENCE)),
                          (Gate(GateName.THROUGHPUT, Status.INCONCLUSIVE),), -0.1, True, "below")
    assert settle(undecided, Policy("pass")) is undecided
    below = settle(undecided, Policy("below"))
    assert below.status is Status.FAIL and undecided.status is Status.INCONCLUSIVE  # a new value, the old intact
    assert render(below) == (f"FAIL c: 900 img/s{REASON}undecided after 10 runs{REASON}fails: its estimate is below "
                             "the threshold, not confirmed (--dlperf-inconclusive below)")
    assert below.main_status is Status.INCONCLUSIVE  # the gate's own verdict stays what the runs showed
    nights = settle(undecided, Policy("pass", nights=3), streak=2)
    assert nights.status is Status.FAIL and "sessions in a row" in render(nights).split(REASON)[-1]
    refused = refuse(Judgement(Status.PASS, (Reason("c: 1000 img/s", Why.HEADLINE, Status.PASS),)), "c",
                     "2 quiet runs, 5 wanted")
    assert render(refused) == f"FAIL c: 2 quiet runs, 5 wanted{REASON}PASS c: 1000 img/s"
    assert Judgement.from_dict(refused.status, refused.to_dict()) == refused


#: What reads or edits text as a verdict's: splitting on the reason separator or on ": ", stripping a status word.
EDITS = ("split", "rsplit", "partition", "removeprefix", "removesuffix", "replace", "startswith", "splitlines")
#: The names a verdict's words go by in the package.
MESSAGES = ("message", "verdict_message", "messages")


def message_edits(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``module:line`` of each string operation (:data:`EDITS`) on a verdict's message in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EDITS):
            continue
        target = node.func.value
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name in MESSAGES and not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                                     and target.value.id == "exc"):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_but_the_reporting_one_edits_a_verdicts_words():
    edits = [hit for path in sorted(PACKAGE.rglob("*.py")) if path.name != "verdicts.py"
             for hit in message_edits(path)]
    assert not edits, f"a verdict's message split or edited outside reporting/verdicts.py: {edits}"


def test_the_search_finds_an_edit(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(result, verdict):\n    first = result.message.split('\\n  ')[0]\n"
                      "    return verdict.message.removeprefix('INCONCLUSIVE'), first\n")
    assert message_edits(sample, tmp_path) == ["sample.py:2", "sample.py:3"]


CONTROLLER = PACKAGE / "controller"
#: The controller's modules that are not on a case's walk: what a session leaves after every case (it reads the
#: entries of a baseline being replaced, not a case's) and the kinds' shared declarations and registration.
OFF_THE_WALK = ("outputs.py", "kinds/__init__.py", "kinds/builtin.py")
MAX_WALK_ROOMS = 5


def mentions(path: Path, name: str = "entry") -> bool:
    """Whether ``path``'s code (not its docstrings) names ``name``: a variable, an argument or an attribute."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.arg) and node.arg == name \
                or isinstance(node, ast.Attribute) and node.attr == name:
            return True
    return False


def entry_walk(kind: Path, controller: Path = CONTROLLER) -> list[str]:
    """The rooms (modules) of the controller a case of ``kind`` carries its baseline entry through: every module
    of the controller that names an entry, but the other kinds' and those off the walk (:data:`OFF_THE_WALK`)."""
    kinds = controller / "kinds"
    shared = [p for p in sorted(controller.rglob("*.py")) if p.parent != kinds or p == kind]
    return [p.relative_to(controller).as_posix() for p in shared
            if p.relative_to(controller).as_posix() not in OFF_THE_WALK and mentions(p)]


def test_a_cases_entry_walks_through_at_most_five_rooms():
    kinds = [p for p in sorted((CONTROLLER / "kinds").glob("*.py")) if p.name not in ("__init__.py", "builtin.py")]
    assert len(kinds) >= 5
    for kind in kinds:
        walk = entry_walk(kind)
        assert len(walk) <= MAX_WALK_ROOMS, f"{kind.name}: {walk}"
    assert entry_walk(CONTROLLER / "kinds" / "throughput.py") == [
        "collection.py", "kinds/throughput.py", "pipeline.py", "references.py", "runner.py"]


def test_the_walk_counts_a_room_that_names_an_entry(tmp_path):
    (tmp_path / "kinds").mkdir()
    (tmp_path / "kinds" / "mine.py").write_text('"""an entry, in words only"""\n')
    (tmp_path / "a.py").write_text("def f(plan):\n    return plan.reference.entry\n")
    (tmp_path / "b.py").write_text("def g(entry=None):\n    pass\n")
    (tmp_path / "c.py").write_text("x = 1  # entry\n")
    assert entry_walk(tmp_path / "kinds" / "mine.py", tmp_path) == ["a.py", "b.py"]
