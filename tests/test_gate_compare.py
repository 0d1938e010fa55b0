"""``dlperf compare NEW.json OLD.json`` (issue 51): two results files, case by case, judged as the gate judges."""

from __future__ import annotations

import copy
import json

import pytest

from pytest_dlperf import cli


def scaled(document: dict, factor: float) -> dict:
    """The document with every case's figures and counted runs times ``factor`` (a slower or faster build)."""
    out = copy.deepcopy(document)
    for case in out["cases"]:
        case["throughput"] *= factor
        for run in case["evidence"]["runs"]:
            run["throughput"] *= factor
    return out


def test_compare_judges_each_case_of_one_file_against_the_others(dlperf, capsys):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "3", "--dlperf-json", "old.json")
    assert result.ret == 0
    capsys.readouterr()  # the inner session's output
    old = json.loads((dlperf.path / "old.json").read_text())
    # Runs of known figures (this machine's own spread, under a loaded suite, is not the subject).
    old["cases"][0]["throughput"] = 1000.0
    old["cases"][0]["evidence"]["runs"] = [{"index": i, "throughput": v, "busy": None}
                                           for i, v in enumerate((1000.0, 1010.0, 990.0, 1005.0, 995.0))]
    (dlperf.path / "old.json").write_text(json.dumps(old))
    (dlperf.path / "same.json").write_text(json.dumps(old))
    (dlperf.path / "slow.json").write_text(json.dumps(scaled(old, 0.5)))
    extra = copy.deepcopy(old)
    extra["cases"].append({**extra["cases"][0], "id": "tiny-fp32-bs32-gpu1-other"})
    (dlperf.path / "extra.json").write_text(json.dumps(extra))
    folder = str(dlperf.path)

    assert cli.main(["compare", f"{folder}/same.json", f"{folder}/old.json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [cell.strip() for cell in out[0].split(" | ")] == ["case", "NEW", "OLD", "NEW/OLD", "98% CI", "at 5%"]
    assert out[1].startswith("tiny-fp32-bs32-gpu1 ") and out[1].endswith(" | same")
    assert out[-1].startswith("dlperf: 0 of 1 case(s) in both files slower")

    assert cli.main(["compare", f"{folder}/slow.json", f"{folder}/old.json"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1].split(" | ")[3].strip() == "-50%" and out[1].endswith(" | slower")
    assert out[-1].endswith("slower in " + f"{folder}/slow.json than in {folder}/old.json: tiny-fp32-bs32-gpu1")
    # The other way round it is faster; a case in one file only is listed, never judged.
    assert cli.main(["compare", f"{folder}/old.json", f"{folder}/slow.json"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(" | faster")
    assert cli.main(["compare", f"{folder}/extra.json", f"{folder}/old.json", "--tolerance", "0.1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("| at 10%") and out[2].endswith("| only in NEW")
    # Bad input: one line naming the option and what is expected (status 2).
    assert cli.main(["compare", f"{folder}/old.json", f"{folder}/old.json", "--tolerance", "5"]) == 2
    assert "--tolerance 5.0: expected a fraction between 0 and 1" in capsys.readouterr().err


def test_bmf_writes_bencher_metric_format(dlperf, capsys, tmp_path):
    """``dlperf bmf`` (issue 51): each case a benchmark, its throughput and interval, checked against the schema
    the package ships (Bencher's published one asks the same: a number value, optional lower and upper values)."""
    import jsonschema

    from pytest_dlperf import jsonio

    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "2", "--dlperf-json", "results.json")
    assert result.ret == 0
    capsys.readouterr()
    out = tmp_path / "bmf.json"
    assert cli.main(["bmf", str(dlperf.path / "results.json"), "-o", str(out)]) == 0
    document = json.loads(out.read_text())
    case = json.loads((dlperf.path / "results.json").read_text())["cases"][0]
    metric = document["tiny-fp32-bs32-gpu1"]["throughput"]
    assert metric["value"] == case["throughput"]
    assert metric["lower_value"] == case["evidence"]["estimate"]["low"] < metric["value"] < metric["upper_value"]
    jsonschema.validate(document, jsonio.schema("bmf"))
    # A metric without a value is not BMF: the schema refuses it.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"b": {"throughput": {"lower_value": 1.0}}}, jsonio.schema("bmf"))
    capsys.readouterr()
    assert cli.main(["bmf", str(dlperf.path / "results.json")]) == 0  # to stdout
    assert json.loads(capsys.readouterr().out) == document
