import json
import os
import statistics

import pytest

from pytest_dlperf import baseline, jsonio, tolerance
from pytest_dlperf.cases import Case


def write(tmp_path, document, name="b.json"):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def doc(*cases, **top):
    return {"schema_version": 1, "kind": "dlperf-baseline", "provenance": {"source": "unit test"}, **top,
            "cases": list(cases)}


ENTRY = {"model": "resnet50", "precision": "amp", "batch_size": 256, "gpus": 8, "throughput": 5889.05,
         "unit": "img/s", "source": "seed 000"}


def test_load_indexes_cases_and_resolves_defaults(tmp_path):
    path = write(tmp_path, doc(ENTRY, {**ENTRY, "gpus": 1, "throughput": 790.0, "tolerance": 0.1,
                                       "steps": 50, "source": None} | {"source": "x"},
                               defaults={"tolerance": 0.03, "repeats": 7}))
    b = baseline.load(path)
    entry = b.find(Case.make("resnet50", "amp", 256, 8))
    assert entry.throughput == 5889.05 and entry.tolerance == 0.03 and entry.source == "seed 000"
    one = b.find(Case.make("resnet50", "amp", 256, 1))
    assert one.tolerance == 0.1 and one.overrides == {"steps": 50}
    assert b.find(Case.make("resnet50", "fp32", 256, 1)) is None
    assert b.defaults["repeats"] == 7


def test_tolerance_falls_back_to_the_session_default(tmp_path):
    b = baseline.load(write(tmp_path, doc(ENTRY)))
    entry = b.entries[0]
    assert entry.tolerance is None
    assert entry.expected("img/s", 0.07).tolerance == 0.07
    assert entry.expected("img/s").tolerance == baseline.DEFAULT_TOLERANCE


@pytest.mark.parametrize(("document", "where", "problem"), [
    (doc({**ENTRY, "batch_size": 0}), "$.cases[0].batch_size", "0 is less than the minimum of 1"),
    (doc({**ENTRY, "precision": "fp8"}), "$.cases[0].precision", "'fp8' is not one of"),
    (doc({k: v for k, v in ENTRY.items() if k != "throughput"}), "$.cases[0]", "'throughput' is a required"),
    (doc({**ENTRY, "throughtput": 1}), "$.cases[0]", "unexpected field 'throughtput'"),
    (doc(ENTRY, defaults={"tolerance": 5}), "$.defaults.tolerance", "5 is greater than or equal to"),
    ({**doc(ENTRY), "schema_version": 3}, "$.schema_version", "schema_version 3 is not supported"),
    (doc(ENTRY, ENTRY), "$.cases[1]", "duplicate case resnet50-amp-bs256-gpu8 (also $.cases[0])"),
    ({**doc(ENTRY), "kind": "dlperf-results"}, "$.kind",
     "expected kind 'dlperf-baseline' (baseline document), found a 'dlperf-results' document"),
])
def test_errors_name_the_file_and_the_json_path(tmp_path, document, where, problem):
    path = write(tmp_path, document)
    with pytest.raises(jsonio.DocumentError) as info:
        baseline.load(path)
    assert info.value.path == str(path)
    assert info.value.where == where
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{path}: {where}: ")


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(jsonio.UnreadableError, match="nope.json: baseline file not found"):
        baseline.load(tmp_path / "nope.json")
    bad = write(tmp_path, '{"schema_version": 1,\n "cases": [}')
    with pytest.raises(jsonio.DocumentError, match=r"b.json: not valid JSON: .* at line 2 column 12"):
        baseline.load(bad)


def test_from_measurements_is_a_valid_baseline_that_round_trips(tmp_path):
    env = {"host": {"hostname": "box", "cpu": "Some CPU"}, "versions": {"torch": "2.14.1", "cuda": None},
           "device": {"type": "cpu", "name": "Some CPU"}}
    records = [{"case": Case.make("tiny", "fp32", 32, 1).to_dict(), "throughput": 1234.56789, "unit": "img/s"},
               {"case": Case.make("tiny", "amp", 16, 1, {"image_size": 64}).to_dict(), "throughput": 99.0,
                "unit": "img/s"}]
    document = baseline.from_measurements(records, env, tolerance=0.1, steps={"steps": 5})
    path = tmp_path / "saved.json"
    baseline.save(path, document)
    loaded = baseline.load(path)
    assert [e.case.id for e in loaded.entries] == ["tiny-fp32-bs32-gpu1", "tiny-amp-bs16-gpu1-img64"]
    assert loaded.entries[0].throughput == 1234.568
    assert loaded.entries[0].tolerance == 0.1
    assert loaded.data["provenance"]["software"] == {"torch": "2.14.1"}
    assert loaded.hardware == {"device": "cpu", "cpu": "Some CPU"}


def test_an_invalid_document_is_never_written(tmp_path):
    path = write(tmp_path, doc(ENTRY))
    before = path.read_text()
    with pytest.raises(jsonio.DocumentError):
        baseline.save(path, doc({**ENTRY, "batch_size": -3}))
    assert path.read_text() == before


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = write(tmp_path, doc(ENTRY))
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        baseline.save(path, doc({**ENTRY, "throughput": 1.0}))
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_every_schema_is_a_valid_draft_2020_12_schema():
    import jsonschema

    for name in jsonio.SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(jsonio.schema(name))


def test_a_saved_baseline_keeps_the_step_counts_its_defaults_do_not_give():
    def record(precision, warmup, steps):
        return {"case": {"model": "tiny", "precision": precision, "batch_size": 32, "gpus": 1, "settings": {}},
                "throughput": 100.0, "unit": "img/s",
                "parameters": {"warmup_steps": warmup, "steps": steps, "repeats": 3}}

    document = baseline.from_measurements([record("fp32", 10, 50), record("bf16", 3, 8)], {},
                                          steps={"repeats": 3})
    jsonio.validate(document, "baseline")
    assert document["defaults"] == {"tolerance": baseline.DEFAULT_TOLERANCE, "repeats": 3}
    fp32, bf16 = document["cases"]
    assert (fp32["warmup_steps"], fp32["steps"], bf16["warmup_steps"], bf16["steps"]) == (10, 50, 3, 8)
    assert "repeats" not in fp32 and "repeats" not in bf16


@pytest.mark.parametrize("name", ["../../escape", "a/b", "", ".hidden", "-x", "tiny\n", "with space", "ü"])
def test_a_model_name_no_baseline_could_name_is_refused_at_registration(name):
    from pytest_dlperf import models

    pattern = jsonio.schema("baseline")["$defs"]["case"]["properties"]["model"]["pattern"]
    with pytest.raises(ValueError) as info:
        models.register_model(name, task="image-classification")(lambda settings: None)
    assert f"model name {name!r} is not allowed: a model name matches {pattern}" in str(info.value)
    assert name not in models.list_models()


def test_names_the_schema_takes_still_register():
    from pytest_dlperf import models

    saved = models.snapshot()
    try:
        for name in ("my-net_2.1+x", "R50"):
            models.register_model(name, task="image-classification")(lambda settings: None)
            assert name in models.list_models()
    finally:
        models.restore(saved)


def test_a_model_name_with_a_trailing_newline_is_refused_in_a_baseline_too(tmp_path):
    # JSON Schema's "$" is Python's here: it matches before a final newline, so the schema alone lets it by.
    path = write(tmp_path, doc({**ENTRY, "model": "resnet50\n"}))
    with pytest.raises(jsonio.DocumentError, match=r"b.json: \$.cases\[0\].model: 'resnet50\\n' does not match"):
        baseline.load(path)


def test_an_entry_stands_for_its_step_counts_then_the_defaults_then_the_built_in_ones():
    assert baseline.method({"steps": 50}, {"repeats": 3}) == {"warmup_steps": 20, "steps": 50, "repeats": 3}
    assert baseline.method(None, {}) == baseline.STEP_DEFAULTS == {"warmup_steps": 20, "steps": 100, "repeats": 5}
    entry = {"steps": 50, "repeats": 7}
    baseline.record_method(entry, {"warmup_steps": 2, "steps": 100, "repeats": 3}, {"repeats": 3})
    assert entry == {"warmup_steps": 2}  # steps 100 and repeats 3 are what the defaults give
    assert baseline.method(entry, {"repeats": 3}) == {"warmup_steps": 2, "steps": 100, "repeats": 3}


# --------------------------------------------------------------------------- noise-aware tolerance on save


def measured_record(*runs, precision="fp32"):
    """A results record (as --dlperf-json writes it) whose last attempt's runs had these windows."""
    case = Case.make("tiny", precision, 32, 1)
    return {"id": case.id, "case": case.to_dict(), "unit": "img/s", "throughput": 100.0,
            "attempts": [{"throughput": 100.0, "runs": [{"windows": [{"throughput": w} for w in run]}
                                                        for run in runs]}]}


def test_a_quiet_case_is_saved_with_the_tolerance_asked_for():
    widened = []
    document = baseline.from_measurements([measured_record([100.0, 101.0, 99.0, 100.5, 99.5])], {},
                                          tolerance=0.05, widened=widened)
    jsonio.validate(document, "baseline")
    assert widened == [] and "tolerance" not in document["cases"][0] and "notes" not in document["cases"][0]
    assert document["defaults"]["tolerance"] == 0.05


def test_a_noisy_case_is_saved_with_what_its_windows_spread_supports():
    windows = [100.0, 110.0, 90.0, 105.0, 95.0]  # CV 7.9%: 3 x CV = 23.7% -> 24%
    widened = []
    document = baseline.from_measurements([measured_record(windows)], {}, tolerance=0.05, widened=widened)
    jsonio.validate(document, "baseline")
    entry = document["cases"][0]
    assert entry["tolerance"] == 0.24
    assert entry["notes"] == "tolerance 24%, not 5%: windows varied 8% (CV) when measured"
    (wide,) = widened
    assert (wide.case_id, wide.requested, wide.tolerance, wide.noisy) == ("tiny-fp32-bs32-gpu1", 0.05, 0.24, False)
    assert wide.line() == ("tiny-fp32-bs32-gpu1: windows varied 8% (CV); saved with tolerance 24% (3 x CV), not 5%, "
                           "which this noise would fail by chance")
    # A wider tolerance asked for stays.
    assert "tolerance" not in baseline.from_measurements([measured_record(windows)], {}, tolerance=0.3)["cases"][0]


def test_with_three_runs_or_more_the_spread_is_the_runs_medians():
    # Each run's windows vary 30%, but their medians agree within 1%: the median is what is gated.
    runs = [[70.0, 100.0, 130.0], [71.0, 101.0, 131.0], [69.0, 99.0, 129.0]]
    spread = tolerance.measured_spread(measured_record(*runs))
    assert (spread.over, spread.count) == ("runs", 3) and spread.cv == pytest.approx(0.01)
    assert "tolerance" not in baseline.from_measurements([measured_record(*runs)], {}, tolerance=0.05)["cases"][0]
    # Two runs: two medians give no usable spread, so both runs' windows do.
    assert tolerance.measured_spread(measured_record(*runs[:2])).over == "windows"


def test_runs_measured_on_a_busy_machine_are_not_the_cases_noise():
    runs = [[100.0, 101.0], [60.0, 61.0], [99.0, 100.0], [101.0, 100.0]]  # the second, busy: 40% slower
    record = measured_record(*runs)
    for index, run in enumerate(record["attempts"][0]["runs"]):
        run["index"] = index
    assert tolerance.measured_spread(record).cv > 0.15
    record["evidence"] = {"runs": [{"index": i, "throughput": statistics.median(r),
                                    "busy": "memory bandwidth 6.0 GB/s, 40% below this case's fastest run's 10.0 GB/s"
                                    if i == 1 else None} for i, r in enumerate(runs)]}
    spread = tolerance.measured_spread(record)
    assert (spread.over, spread.count) == ("runs", 3) and spread.cv < 0.01
    assert "tolerance" not in baseline.from_measurements([record], {}, tolerance=0.05)["cases"][0]


def test_a_case_too_noisy_to_gate_is_saved_capped_and_flagged():
    windows = [100.0, 40.0, 160.0, 70.0, 130.0]  # CV 47%: 3 x CV = 142%, more than a baseline takes
    widened = []
    document = baseline.from_measurements([measured_record(windows)], {}, tolerance=0.05, widened=widened)
    jsonio.validate(document, "baseline")  # the schema's tolerance is below 1
    assert document["cases"][0]["tolerance"] == tolerance.MAX_SAVED_TOLERANCE == 0.9
    (wide,) = widened
    assert wide.noisy
    assert wide.line() == (
        "tiny-fp32-bs32-gpu1: windows varied 47% (CV); saved with tolerance 90%, the widest a baseline takes "
        "(3 x CV is 142%), not 5%, which this noise would fail by chance; too noisy to catch a slowdown under 90%: "
        "measure it on a quieter machine or with more --dlperf-runs")
    assert tolerance.summary_line(2, widened, 0.05, runs=1) == (
        "1 of 2 saved case(s) got a tolerance wider than the 5% asked for: their measured noise needs it (1 of them "
        "too noisy to catch a slowdown under 50%); --dlperf-runs 3 would also measure the noise between runs, "
        "often larger")


def test_a_saved_tolerance_is_rounded_up_to_a_whole_percent():
    record = measured_record([100.0, 104.0, 96.0])  # CV 4%: 3 x CV = 12% exactly
    assert baseline.from_measurements([record], {}, tolerance=0.05)["cases"][0]["tolerance"] == 0.12
    record = measured_record([100.0, 104.1, 96.0])
    assert baseline.from_measurements([record], {}, tolerance=0.05)["cases"][0]["tolerance"] == 0.13


def test_a_record_without_windows_keeps_the_tolerance_asked_for():
    record = {"case": Case.make("tiny", "fp32", 32, 1).to_dict(), "throughput": 5.0, "unit": "img/s"}
    assert tolerance.noise_tolerance("x", record, 0.05) == (0.05, None)
