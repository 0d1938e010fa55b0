import json
import os
import statistics

import pytest

from pytest_dlperf import baseline, jsonio
from pytest_dlperf.gate import tolerance
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


# --------------------------------------------------------------------------- the tolerance asked for, on save


def evidence_record(*figures, busy=()):
    """A results record (as --dlperf-json writes it) whose evidence runs had these figures."""
    case = Case.make("tiny", "fp32", 32, 1)
    return {"id": case.id, "case": case.to_dict(), "unit": "img/s", "throughput": 100.0,
            "evidence": {"runs": [{"index": i, "throughput": f, "busy": "other processes used 180% CPU" if i in busy
                                   else None} for i, f in enumerate(figures)]}}


def test_a_saved_case_keeps_the_tolerance_asked_for_whatever_its_noise():
    for figures in ([100.0, 101.0, 99.0, 100.5, 99.5], [100.0, 140.0, 60.0, 120.0, 80.0]):
        noisy = []
        document = baseline.from_measurements([evidence_record(*figures)], {}, tolerance=0.05, noisy_cases=noisy,
                                              max_runs=10)
        jsonio.validate(document, "baseline")
        assert "tolerance" not in document["cases"][0] and document["defaults"]["tolerance"] == 0.05
    # A tolerance of the case's own (an entry's, a recorded machine's) stays its own.
    record = {**evidence_record(100.0, 101.0, 99.0), "tolerance": 0.2}
    assert baseline.from_measurements([record], {}, tolerance=0.05)["cases"][0]["tolerance"] == 0.2


def test_a_case_too_noisy_for_its_tolerance_is_said_with_what_would_decide_it():
    quiet, noisy = [], []
    baseline.from_measurements([evidence_record(100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8)], {},
                               tolerance=0.05, noisy_cases=quiet, max_runs=10)
    assert quiet == []
    document = baseline.from_measurements([evidence_record(100.0, 140.0, 60.0, 120.0, 80.0)], {}, tolerance=0.05,
                                          noisy_cases=noisy, max_runs=10)
    (found,) = noisy
    assert (found.case_id, found.runs, found.tolerance) == ("tiny-fp32-bs32-gpu1", 5, 0.05)
    assert found.cv == pytest.approx(statistics.stdev([100, 140, 60, 120, 80]) / 100)
    assert found.line().startswith("tiny-fp32-bs32-gpu1: its 5 runs varied 31.6% (CV): too noisy for 5% here: ")
    assert f"10 runs decide a tolerance of {round(100 * found.decidable)}%" in found.line()
    assert document["cases"][0]["notes"].startswith("its runs varied 31.6% (CV) when measured: ")
    assert tolerance.summary_line(2, noisy, 0.05).startswith("1 of 2 saved case(s) varied too much for the 5% asked")
    # Every such line names pairs; where the controller's own probe read the host between the runs, how far the host
    # itself moved (the saved entry's host_runs), and what that does to unchanged code.
    assert found.host_cv is None and "the host itself" not in found.line()
    assert found.line().endswith(f"ask for --dlperf-tolerance {found.decidable:g}, or gate with pairs "
                                 f"(--dlperf-against)")
    hosts = [30.0, 18.0, 24.0, 27.0, 21.0]
    record = evidence_record(100.0, 140.0, 60.0, 120.0, 80.0)
    for run, reading in zip(record["evidence"]["runs"], hosts):
        run["host"] = reading
    again = []
    document = baseline.from_measurements([record], {}, tolerance=0.05, noisy_cases=again, max_runs=10)
    assert document["cases"][0]["host_runs"] == hosts
    assert again[0].host_cv == pytest.approx(statistics.stdev(hosts) / statistics.fmean(hosts))
    assert (f"so expect inconclusive verdicts; the host itself moved {100 * again[0].host_cv:.1f}% (CV, read between "
            f"runs by a probe of its own): in minutes when it runs slow, unchanged code can fail; 10 runs decide") \
        in again[0].line()
    # A host that read steadier than the tolerance: the spread is more likely the case's own.
    steady = tolerance.noisy("c", [100.0, 140.0, 60.0, 120.0, 80.0], 0.05, 10, [20.0, 20.4, 19.8, 20.1])
    assert steady.host_cv < 0.05
    assert (f"so expect inconclusive verdicts; the host itself read steadier ({100 * steady.host_cv:.1f}% CV, read "
            f"between runs by a probe of its own): look at the case's own noise first; 10 runs") in steady.line()


def test_runs_measured_on_a_busy_machine_are_not_the_cases_runs():
    record = evidence_record(100.0, 60.0, 99.0, 101.0, busy={1})
    entry = baseline.from_measurements([record], {}, tolerance=0.05)["cases"][0]
    assert entry["runs"] == [100.0, 99.0, 101.0]


def test_the_runs_a_session_needs_and_the_tolerance_a_budget_decides():
    import math

    assert tolerance.runs_to_pass(math.log1p(0.02), 10, 0.05) == 1
    assert 3 <= tolerance.runs_to_pass(math.log1p(0.08), 10, 0.05) <= 10  # 8% noise: a pass rules out 10%
    needed = tolerance.runs_to_pass(math.log1p(0.15), 10, 0.05)
    assert needed is None or needed > 10  # 15% noise cannot pass an unchanged case at 5% in 10 runs
    wider = tolerance.decidable_tolerance(math.log1p(0.15), 10, 10)
    assert 0.05 < wider < 0.3 and tolerance.runs_to_pass(math.log1p(0.15), 10, wider) <= 10


def test_a_record_without_runs_is_saved_without_a_note():
    record = {"case": Case.make("tiny", "fp32", 32, 1).to_dict(), "throughput": 5.0, "unit": "img/s"}
    entry = baseline.from_measurements([record], {}, tolerance=0.05, noisy_cases=[])["cases"][0]
    assert "notes" not in entry and "tolerance" not in entry and tolerance.noisy("x", [], 0.05, 10) is None


def test_counts_written_as_whole_floats_are_read_as_integers(tmp_path):
    # JSON Schema's "integer" takes 20.0 (a number with no fraction); the plugin counts steps, seeds and threads
    # with them, so they are ints once read (the fuzz test found warmup_steps 0.0 left a float in a run's spec).
    path = write(tmp_path, doc({**ENTRY, "gpus": 1, "warmup_steps": 0.0, "steps": 5.0, "seeds": 2.0,
                                "cpu_threads": 2.0},
                               defaults={"repeats": 3.0, "tolerance": 0.05}, schema_version=2))
    b = baseline.load(path)
    (entry,) = b.entries
    assert entry.overrides == {"warmup_steps": 0, "steps": 5} and entry.seeds == 2 and entry.cpu_threads == 2
    assert b.step_defaults == {"repeats": 3}
    assert all(type(v) is int for v in (*entry.overrides.values(), entry.seeds, entry.cpu_threads,
                                        *b.step_defaults.values()))
