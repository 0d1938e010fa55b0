"""The dlperf command: report, baseline validate / diff / update; exit statuses and messages."""

import json
import statistics
import os
import subprocess
import sys

import pytest

from pytest_dlperf import baseline, cli, jsonio
from pytest_dlperf.cases import Case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def baseline_doc(*cases, **top):
    return {"schema_version": 1, "kind": "dlperf-baseline", "hardware": {"device": "cpu"},
            "provenance": {"source": "the original measurement", "date": "2026-01-01"},
            "defaults": {"tolerance": 0.1}, **top, "cases": list(cases)}


def entry(precision="fp32", gpus=1, throughput=1000.0, **extra):
    return {"model": "tiny", "precision": precision, "batch_size": 32, "gpus": gpus, "throughput": throughput,
            "unit": "img/s", **extra}


def result(precision="fp32", gpus=1, throughput=1100.0, verdict="pass"):
    case = Case.make("tiny", precision, 32, gpus)
    return {"id": case.id, "case": case.to_dict(), "unit": "img/s", "verdict": verdict, "message": verdict,
            "throughput": throughput, "parameters": {"warmup_steps": 20, "steps": 100, "repeats": 5, "runs": 3}}


def results_doc(*cases, device="cpu"):
    return {"schema_version": 1, "kind": "dlperf-results", "created": "2026-11-21T10:00:00+00:00",
            "environment": {"host": {"hostname": "box"}, "device": {"type": device, "name": "Some device"}},
            "options": {}, "baseline": None, "cases": list(cases)}


def write(path, document):
    path.write_text(json.dumps(document, indent=2) if not isinstance(document, str) else document)
    return str(path)


# --------------------------------------------------------------------------- validate


def test_validate_says_valid_invalid_or_unreadable_with_exit_0_1_2(tmp_path, capsys):
    good = write(tmp_path / "good.json", baseline_doc(entry()))
    assert cli.main(["baseline", "validate", good]) == 0
    assert capsys.readouterr().out == f"{good}: valid baseline, 1 case(s); source: the original measurement\n"

    bad = write(tmp_path / "bad.json", baseline_doc(entry(batch_size=0)))
    assert cli.main(["baseline", "validate", good, bad]) == 1
    err = capsys.readouterr().err
    assert err == f"dlperf: {bad}: $.cases[0].batch_size: 0 is less than the minimum of 1\n"

    assert cli.main(["baseline", "validate", bad, str(tmp_path / "missing.json")]) == 2
    assert f"dlperf: {tmp_path / 'missing.json'}: baseline file not found" in capsys.readouterr().err


def test_every_subcommand_has_help_and_usage_errors_exit_2(capsys):
    for argv in (["--help"], ["report", "--help"], ["plot", "--help"], ["dataset", "--help"], ["baseline", "--help"],
                 ["baseline", "validate", "--help"],
                 ["baseline", "diff", "--help"], ["baseline", "update", "--help"]):
        assert cli.main(argv) == 0, argv
        assert capsys.readouterr().out.startswith("usage: dlperf"), argv
    assert cli.main(["baseline", "update", "b.json"]) == 2
    assert "the following arguments are required: --from" in capsys.readouterr().err
    assert cli.main(["plot", "r.json"]) == 2
    assert "the following arguments are required: -o/--output" in capsys.readouterr().err
    assert cli.main(["graph"]) == 2
    assert "invalid choice: 'graph'" in capsys.readouterr().err


# --------------------------------------------------------------------------- diff


def test_diff_lists_removed_added_and_changed_cases_and_exits_1(tmp_path, capsys):
    old = write(tmp_path / "old.json", baseline_doc(entry(), entry("bf16"), entry(gpus=2, throughput=1500.0)))
    new = write(tmp_path / "new.json", baseline_doc(entry(throughput=1100.0, tolerance=0.2), entry("bf16"),
                                                     entry("amp", throughput=300.0), defaults={"tolerance": 0.05}))
    assert cli.main(["baseline", "diff", old, new]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"--- {old}", f"+++ {new}",
        "~ tiny-fp32-bs32-gpu1: throughput 1000.0 -> 1100.0 img/s (+10.0%)",
        "+ tiny-fp32-bs32-gpu1: tolerance: 0.2",
        "- tiny-fp32-bs32-gpu2: 1500.0 img/s",
        "+ tiny-amp-bs32-gpu1: 300.0 img/s",
        "~ defaults.tolerance: 0.1 -> 0.05",
        "1 case(s) changed, 1 case(s) removed, 1 case(s) added, 1 case(s) unchanged",
    ]
    assert cli.main(["baseline", "diff", old, old]) == 0
    assert capsys.readouterr().out == f"{old} and {old}: no differences (3 case(s))\n"
    assert cli.main(["baseline", "diff", old, write(tmp_path / "r.json", results_doc())]) == 2
    assert "r.json: $.kind: expected kind 'dlperf-baseline' (baseline document), found a 'dlperf-results'" \
        in capsys.readouterr().err


# --------------------------------------------------------------------------- update


def test_update_takes_measured_cases_keeps_the_rest_and_records_provenance(tmp_path, capsys):
    path = write(tmp_path / "b.json", baseline_doc(entry(source="paper"), entry("bf16", tolerance=0.3),
                                                   entry(gpus=2, throughput=1500.0)))
    results = write(tmp_path / "results.json", results_doc(
        result(throughput=1234.5678), result("bf16", verdict="error", throughput=None),
        result("amp", throughput=321.0), result(gpus=2, verdict="skipped", throughput=None)))
    assert cli.main(["baseline", "update", path, "--from", results]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "updated tiny-fp32-bs32-gpu1: 1000.0 -> 1234.6 img/s (+23.5%)",
        "added tiny-amp-bs32-gpu1: 321.0 img/s",
        "kept 2 entries the results did not measure",
        "not measured: tiny-bf16-bs32-gpu1 (error)",
        "not measured: tiny-fp32-bs32-gpu2 (skipped)",
        f"{path}: updated",
    ]
    data = jsonio.load(path, "baseline")
    by_id = {Case.from_dict(c).id: c for c in data["cases"]}
    source = "measured by pytest-dlperf on box (results.json, 2026-11-21T10:00:00+00:00)"
    assert by_id["tiny-fp32-bs32-gpu1"] == {**entry(throughput=1234.568), "source": source}
    assert by_id["tiny-bf16-bs32-gpu1"] == entry("bf16", tolerance=0.3)  # an error: not updated
    assert by_id["tiny-fp32-bs32-gpu2"] == entry(gpus=2, throughput=1500.0)  # not measured: stays
    assert by_id["tiny-amp-bs32-gpu1"] == {**entry("amp", throughput=321.0), "source": source}
    assert data["provenance"]["source"] == "the original measurement" and data["provenance"]["date"] == "2026-01-01"
    [update] = data["provenance"]["updates"]
    assert update["results"] == results and update["results_created"] == "2026-11-21T10:00:00+00:00"
    assert update["updated"] == [{"case": "tiny-fp32-bs32-gpu1", "from": 1000.0, "to": 1234.568, "old_source": "paper",
                                  "parameters": {"warmup_steps": 20, "steps": 100, "repeats": 5, "runs": 3}}]
    assert [a["case"] for a in update["added"]] == ["tiny-amp-bs32-gpu1"]

    # A second update appends to the record; --no-add leaves new cases out.
    write(tmp_path / "results.json", results_doc(result(throughput=1300.0), result("tf32")))
    assert cli.main(["baseline", "update", path, "--from", results, "--no-add"]) == 0
    assert "not added (--no-add): tiny-tf32-bs32-gpu1: 1100.0 img/s" in capsys.readouterr().out
    data = jsonio.load(path, "baseline")
    assert len(data["provenance"]["updates"]) == 2 and len(data["cases"]) == 4


def test_update_from_several_sessions_takes_the_median_of_all_their_counted_runs(tmp_path, capsys):
    def session(created, figures, busy=(), probe=10.0):
        rec = result(throughput=statistics.geometric_mean(figures))
        rec["evidence"] = {"decision": "pass", "stopped": "decided", "estimate": None, "busy_counted": False,
                           "runs": [{"index": i, "throughput": f, "busy": "other processes used 180% CPU"
                                     if i in busy else None, "memory_gbs": probe} for i, f in enumerate(figures)]}
        return {**results_doc(rec), "created": created}

    path = write(tmp_path / "b.json", baseline_doc(entry()))
    files = [write(tmp_path / "mon.json", session("2026-11-23T02:00:00+00:00", [1000.0, 1010.0])),
             write(tmp_path / "tue.json", session("2026-11-24T02:00:00+00:00", [900.0, 300.0, 910.0], busy={1},
                                                   probe=8.0)),
             write(tmp_path / "wed.json", session("2026-11-25T02:00:00+00:00", [1040.0], probe=11.0))]
    assert cli.main(["baseline", "update", path, *[a for f in files for a in ("--from", f)]]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "updated tiny-fp32-bs32-gpu1: 1000.0 -> 1000.0 img/s (+0.0%)"
    (case,) = jsonio.load(path, "baseline")["cases"]
    # The median of the five counted runs of the three sessions (the busy one left out), all of them kept.
    assert case["throughput"] == 1000.0 and case["runs"] == [1000.0, 1010.0, 900.0, 910.0, 1040.0]
    assert case["memory_gbs"] == 10.0
    assert case["source"] == ("measured by pytest-dlperf on box (mon.json, tue.json, wed.json, "
                              "2026-11-25T02:00:00+00:00)")
    # One file that is not valid, wherever it is: nothing written, one line naming it.
    before = (tmp_path / "b.json").read_bytes()
    bad = write(tmp_path / "bad.json", "{")
    assert cli.main(["baseline", "update", path, "--from", files[0], "--from", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlperf: {bad}: ") and err.count("\n") == 1
    assert (tmp_path / "b.json").read_bytes() == before


@pytest.mark.parametrize("results", [
    "not json {",
    results_doc(result() | {"verdict": "excellent"}),
    baseline_doc(entry()),
])
def test_an_invalid_results_file_leaves_the_baseline_untouched(tmp_path, capsys, results):
    path = write(tmp_path / "b.json", baseline_doc(entry()))
    before = (tmp_path / "b.json").read_bytes()
    assert cli.main(["baseline", "update", path, "--from", write(tmp_path / "r.json", results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlperf: {tmp_path / 'r.json'}: ") and err.count("\n") == 1
    assert (tmp_path / "b.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "r.json"]


def test_update_says_where_the_results_host_ran_slower_than_the_entrys_and_notes_it(tmp_path, capsys):
    def session(core):
        rec = result(throughput=900.0)
        rec["evidence"] = {"decision": "pass", "stopped": "decided", "estimate": None, "busy_counted": False,
                           "runs": [{"index": i, "throughput": 900.0, "busy": None, "core_gflops": core}
                                    for i in range(2)]}
        return results_doc(rec)

    path = write(tmp_path / "b.json", baseline_doc(entry(core_gflops=40.0, notes="from the lab")))
    # 32 GFLOP/s is 20% below the entry's 40: more than its 10% tolerance, said and noted.
    assert cli.main(["baseline", "update", path, "--from", write(tmp_path / "r.json", session(32.0))]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "tiny-fp32-bs32-gpu1: measured while the host ran slower: core speed 32.0 GFLOP/s, 20% below the entry it "
        "replaces, 40.0 GFLOP/s; a slowdown that size can pass against its figure (update it from several "
        "sessions' results: --from each)")
    (case,) = jsonio.load(path, "baseline")["cases"]
    assert case["notes"] == ("from the lab; measured while the host ran slower: core speed 32.0 GFLOP/s, 20% below "
                             "the entry it replaces, 40.0 GFLOP/s")
    # The next update, within the tolerance of that entry: the note goes with the figure it was about.
    assert cli.main(["baseline", "update", path, "--from", write(tmp_path / "r2.json", session(30.0))]) == 0
    assert "ran slower" not in capsys.readouterr().out
    (case,) = jsonio.load(path, "baseline")["cases"]
    assert case["notes"] == "from the lab" and case["core_gflops"] == 30.0


def test_update_writes_atomically_and_refuses_other_hardware(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "b.json", baseline_doc(entry()))
    before = (tmp_path / "b.json").read_bytes()
    results = write(tmp_path / "r.json", results_doc(result()))

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    assert cli.main(["baseline", "update", path, "--from", results]) == 2
    assert "No space left on device" in capsys.readouterr().err
    monkeypatch.undo()
    assert (tmp_path / "b.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "r.json"]  # no temporary file left

    gpu = write(tmp_path / "r.json", results_doc(result(), device="cuda"))
    assert cli.main(["baseline", "update", path, "--from", gpu]) == 2
    assert "$.hardware: baseline measured on the CPU (unknown model); this run is on Some device; not updated" \
        in capsys.readouterr().err
    assert (tmp_path / "b.json").read_bytes() == before
    assert cli.main(["baseline", "update", path, "--from", gpu, "--dry-run", "--force"]) == 0
    assert capsys.readouterr().out.endswith(f"{path}: not written (--dry-run)\n")
    assert (tmp_path / "b.json").read_bytes() == before
    # GPU names compare as the verdicts' note compares them: "Tesla" and "NVIDIA" aside.
    v100 = write(tmp_path / "v.json", baseline_doc(entry(), hardware={"device": "cuda", "gpu": "Tesla V100-SXM2-16GB"}))
    doc = results_doc(result(), device="cuda")
    doc["environment"]["device"]["name"] = "NVIDIA V100-SXM2-16GB"
    assert cli.main(["baseline", "update", v100, "--from", write(tmp_path / "r.json", doc), "--dry-run"]) == 0
    doc["environment"]["device"]["name"] = "NVIDIA H100 80GB HBM3"
    assert cli.main(["baseline", "update", v100, "--from", write(tmp_path / "r.json", doc)]) == 2
    assert "baseline measured on Tesla V100-SXM2-16GB; this machine has NVIDIA H100 80GB HBM3; not updated" \
        in capsys.readouterr().err


# --------------------------------------------------------------------------- report


def test_report_to_stdout_and_a_missing_results_file(tmp_path, capsys):
    results = write(tmp_path / "r.json", results_doc(result()))
    assert cli.main(["report", results]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Training throughput report\n") and "| 1 | 1100.0 / - |" in out
    assert cli.main(["report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.md")]) == 2
    assert capsys.readouterr().err == f"dlperf: {tmp_path / 'nope.json'}: results file not found\n"
    assert not (tmp_path / "r.md").exists()


# --------------------------------------------------------------------------- python -m pytest_dlperf


def run_module(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pytest_dlperf", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_python_m_pytest_dlperf_exit_statuses_and_messages(tmp_path):
    done = run_module("--help", cwd=tmp_path)
    assert done.returncode == 0 and "baseline" in done.stdout and "Exit status" in done.stdout
    write(tmp_path / "bad.json", baseline_doc(entry(precision="fp8")))
    done = run_module("baseline", "validate", "bad.json", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("dlperf: bad.json: $.cases[0].precision: 'fp8' is not one of")
    done = run_module("baseline", "diff", "bad.json", cwd=tmp_path)
    assert done.returncode == 2 and "the following arguments are required: NEW" in done.stderr


def test_dataset_writes_an_image_folder_the_backends_accept(tmp_path, capsys):
    from pytest_dlperf import data

    target = tmp_path / "images"
    assert cli.main(["dataset", str(target), "--classes", "3", "--per-class", "5"]) == 0
    assert "wrote 15 JPEG images in 3 class folders" in capsys.readouterr().out
    assert data.scan_image_folder(str(target)) == ("class0", "class1", "class2")
    assert len(list(target.glob("class1/*.jpg"))) == 5
    assert cli.main(["dataset", str(target)]) == 2
    assert "not empty" in capsys.readouterr().err


# --------------------------------------------------------------------------- hostile input and output (issue 11)


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("content", "problem"), [
    (json.dumps(baseline_doc(entry(throughput=1.0))).replace("1.0", "NaN"),
     "$.cases[0].throughput: NaN is not allowed"),
    (json.dumps(baseline_doc(entry(throughput=1.0))).replace("1.0", "1e400"),
     "$.cases[0].throughput: 1e400 is too large for a float (it reads as infinity); expected a finite number"),
    (b"\x89PNG\r\n\x1a\n", "not UTF-8 text: byte 0x89 at offset 0"),
    (b"[" * 50_000, "nested deeper than 64 levels"),
    (b"", "the file is empty; expected a JSON document"),
    (json.dumps(baseline_doc(entry()))[:-2].encode(), "not valid JSON: the document ends early"),
])
def test_a_hostile_file_is_one_line_and_the_documented_exit_status(tmp_path, capsys, content, problem):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = write(tmp_path / "good.json", baseline_doc(entry()))
    results = write(tmp_path / "r.json", results_doc(result()))
    assert cli.main(["baseline", "validate", str(bad)]) == 1  # read, but not a valid baseline
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"dlperf: {bad}: ") and problem in err
    for argv in (["baseline", "diff", good, str(bad)], ["baseline", "update", str(bad), "--from", results],
                 ["baseline", "update", good, "--from", str(bad)], ["report", str(bad)]):
        assert cli.main(argv) == 2, argv  # an input that is not a valid document: trouble
        err = one_line(capsys.readouterr().err)
        assert err.startswith(f"dlperf: {bad}: ") and problem in err, (argv, err)
    assert (tmp_path / "good.json").read_text() == json.dumps(baseline_doc(entry()), indent=2)


def test_report_refuses_a_device_a_fifo_or_a_folder_before_writing_anything(tmp_path, capsys):
    results = write(tmp_path / "r.json", results_doc(result()))
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    (tmp_path / "folder.md").mkdir()
    for target, kind in ((fifo, "a FIFO (named pipe)"), (tmp_path / "folder.md", "a folder")):
        assert cli.main(["report", results, "-o", str(target)]) == 2
        assert one_line(capsys.readouterr().err) == (f"dlperf: {target}: is {kind}, not a file; give the path of a "
                                                     f"file to write\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.md", "folder.md", "r.json"]  # no -logs folder


def test_update_writes_through_a_symlinked_baseline(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    real = write(tmp_path / "store" / "b.json", baseline_doc(entry()))
    link = tmp_path / "b.json"
    link.symlink_to("store/b.json")
    results = write(tmp_path / "r.json", results_doc(result(throughput=1200.0)))
    assert cli.main(["baseline", "update", str(link), "--from", results]) == 0
    assert link.is_symlink() and os.readlink(link) == "store/b.json"
    assert jsonio.load(real, "baseline")["cases"][0]["throughput"] == 1200.0
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["b.json"]


def result_with(steps, **fields):
    rec = result(**fields)
    rec["parameters"] = {**rec["parameters"], **steps}
    return rec


def test_update_records_the_cpu_threads_and_refuses_another_count_than_an_entrys(tmp_path, capsys):
    path = write(tmp_path / "b.json", baseline_doc(entry(), entry("bf16", cpu_threads=2)))
    # An entry saved before the count was recorded takes the results' (it says nothing to hold them to).
    fp32 = write(tmp_path / "fp32.json", results_doc(result_with({"cpu_threads": 1})))
    assert cli.main(["baseline", "update", path, "--from", fp32]) == 0
    capsys.readouterr()
    data = jsonio.load(path, "baseline")
    assert data["cases"][0]["cpu_threads"] == 1 and data["schema_version"] == 2
    before = (tmp_path / "b.json").read_bytes()
    bf16 = write(tmp_path / "bf16.json", results_doc(result_with({"cpu_threads": 1}, precision="bf16")))
    assert cli.main(["baseline", "update", path, "--from", bf16]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"dlperf: {path}: $.cases[1]: tiny-bf16-bs32-gpu1 was measured with cpu_threads 1, not its entry's 2; not "
        f"updated (--force takes the figures with their step counts and CPU threads)\n")
    assert (tmp_path / "b.json").read_bytes() == before
    assert cli.main(["baseline", "update", path, "--from", bf16, "--force"]) == 0
    capsys.readouterr()
    assert [e.cpu_threads for e in baseline.load(path).entries] == [1, 1]


def test_update_refuses_results_measured_with_other_step_counts(tmp_path, capsys):
    path = write(tmp_path / "b.json", baseline_doc(entry(), entry("bf16", steps=50),
                                                   defaults={"tolerance": 0.1, "repeats": 3}))
    before = (tmp_path / "b.json").read_bytes()
    # The built-in warm-up (20) and steps (100), the defaults' repeats (3): tiny fp32's method.
    quick = write(tmp_path / "quick.json", results_doc(result_with({"steps": 10, "repeats": 3})))
    assert cli.main(["baseline", "update", path, "--from", quick]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"dlperf: {path}: $.cases[0]: tiny-fp32-bs32-gpu1 was measured with warmup_steps 20, steps 10, repeats 3, "
        f"not its entry's warmup_steps 20, steps 100, repeats 3; not updated (--force takes the figures with their "
        f"step counts and CPU threads)\n")
    assert cli.main(["baseline", "update", path, "--from", quick, "--dry-run"]) == 1
    capsys.readouterr()
    assert (tmp_path / "b.json").read_bytes() == before

    # A new case is held to the defaults; two at once are counted.
    both = write(tmp_path / "both.json", results_doc(result_with({"steps": 10, "repeats": 3}),
                                                     result_with({"repeats": 5}, precision="amp")))
    assert cli.main(["baseline", "update", path, "--from", both]) == 1
    assert capsys.readouterr().err.endswith("steps 100, repeats 3 (and 1 more case(s)); not updated (--force takes "
                                            "the figures with their step counts and CPU threads)\n")
    new_only = write(tmp_path / "new.json", results_doc(result_with({"repeats": 5}, precision="amp")))
    assert cli.main(["baseline", "update", path, "--from", new_only]) == 1
    assert "$.defaults: tiny-amp-bs32-gpu1 was measured with warmup_steps 20, steps 100, repeats 5, not the " \
           "defaults' warmup_steps 20, steps 100, repeats 3" in capsys.readouterr().err
    assert cli.main(["baseline", "update", path, "--from", new_only, "--no-add"]) == 0  # not added: not checked
    capsys.readouterr()
    assert (tmp_path / "b.json").read_bytes() == before

    # The entry's own step counts are the method: bf16 measured with steps 50 is taken as it is.
    same = write(tmp_path / "same.json", results_doc(result_with({"steps": 50, "repeats": 3}, precision="bf16")))
    assert cli.main(["baseline", "update", path, "--from", same]) == 0
    data = jsonio.load(path, "baseline")
    assert data["cases"][1] == {**entry("bf16", steps=50, throughput=1100.0), "source": data["cases"][1]["source"]}

    # --force takes them and the entries record the step counts their figures were measured with.
    assert cli.main(["baseline", "update", path, "--from", both, "--force"]) == 0
    capsys.readouterr()
    loaded = baseline.load(path)
    by_id = {e.case.id: e for e in loaded.entries}
    assert by_id["tiny-fp32-bs32-gpu1"].overrides == {"steps": 10}
    assert by_id["tiny-amp-bs32-gpu1"].overrides == {"repeats": 5}
    assert by_id["tiny-bf16-bs32-gpu1"].overrides == {"steps": 50}
    # Measured again with the defaults' step counts, an entry drops the counts it no longer needs.
    again = write(tmp_path / "again.json", results_doc(result_with({"steps": 100, "repeats": 3})))
    assert cli.main(["baseline", "update", path, "--from", again, "--force"]) == 0
    assert {e.case.id: e for e in baseline.load(path).entries}["tiny-fp32-bs32-gpu1"].overrides == {}


def test_results_without_step_counts_are_refused_unless_forced(tmp_path, capsys):
    path = write(tmp_path / "b.json", baseline_doc(entry()))
    rec = result()
    del rec["parameters"]
    results = write(tmp_path / "r.json", results_doc(rec))
    assert cli.main(["baseline", "update", path, "--from", results]) == 1
    assert "was measured with warmup_steps ?, steps ?, repeats ?, not its entry's warmup_steps 20, steps 100, " \
           "repeats 5" in one_line(capsys.readouterr().err)
    assert cli.main(["baseline", "update", path, "--from", results, "--force"]) == 0


@pytest.mark.parametrize("throughput", [0.0, 0.0004, -5.0])
def test_update_refuses_a_figure_no_baseline_can_hold_naming_the_results(tmp_path, capsys, throughput):
    path = write(tmp_path / "b.json", baseline_doc(entry()))
    before = (tmp_path / "b.json").read_bytes()
    results = write(tmp_path / "r.json", results_doc(result(throughput=throughput)))
    assert cli.main(["baseline", "update", path, "--from", results]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"dlperf: {results}: $.cases[0].throughput: {throughput!r} cannot be a baseline figure; expected a number "
        f"greater than 0 (at 3 decimals)\n")
    assert (tmp_path / "b.json").read_bytes() == before


def test_an_entry_that_spells_out_a_default_setting_is_updated_not_added_twice(tmp_path, capsys):
    # tiny's image_size is 32: the entry is the case tiny-fp32-bs32-gpu1, as the results have it.
    path = write(tmp_path / "b.json", baseline_doc(entry(settings={"image_size": 32})))
    results = write(tmp_path / "r.json", results_doc(result(throughput=1200.0)))
    assert cli.main(["baseline", "update", path, "--from", results]) == 0
    assert capsys.readouterr().out.startswith("updated tiny-fp32-bs32-gpu1: 1000.0 -> 1200.0 img/s (+20.0%)\n")
    [only] = jsonio.load(path, "baseline")["cases"]
    assert only["throughput"] == 1200.0 and only["settings"] == {"image_size": 32}


def test_update_takes_figures_never_a_command_from_the_results(tmp_path, capsys):
    # A results file is data: the command lines its runs record (or any object beside them) never become a
    # baseline's command, which a later session would run (docs/baselines.md, What runs).
    path = write(tmp_path / "b.json", baseline_doc(entry()))
    ran = {"argv": ["sh", "-c", "touch pwned"], "cwd": "/", "env": {"LD_PRELOAD": "evil.so"}, "parser": "final",
           "method": "final"}
    cases = [{**result(throughput=1200.0), "command": ran}, {**result("amp", throughput=300.0), "command": ran}]
    for case in cases:
        case["attempts"] = [{"throughput": case["throughput"], "runs": [{"index": 0, "command": ran}]}]
    assert cli.main(["baseline", "update", path, "--from", write(tmp_path / "r.json", results_doc(*cases))]) == 0
    capsys.readouterr()
    data = jsonio.load(path, "baseline")
    assert [sorted(c) for c in data["cases"]] == [sorted({**entry(), "source": ""})] * 2
    assert "touch pwned" not in (tmp_path / "b.json").read_text()
