"""A baseline saved while the host ran slow says so: its probes against the entry it replaces, the baseline it
was judged against and its last sessions in the history store (``baseline.slower_host``)."""

from __future__ import annotations

import json
import sqlite3

from pytest_dlperf.baseline import ProbeReference, slower_host

ENTRY = {"model": "tiny", "throughput": 955.7, "memory_gbs": 6.7, "core_gflops": 32.4}


def test_a_probe_more_than_the_tolerance_below_a_reference_is_named_with_it():
    replaced = ProbeReference("the entry it replaces,", memory_gbs=6.8, core_gflops=35.6)
    assert slower_host(ENTRY, [replaced], 0.05) == ("core speed 32.4 GFLOP/s, 9% below the entry it replaces, "
                                                    "35.6 GFLOP/s")
    # Within the tolerance, or a reference without the probe, or an entry without it: nothing to say.
    assert slower_host(ENTRY, [replaced], 0.10) is None
    assert slower_host(ENTRY, [ProbeReference("x", memory_gbs=6.8)], 0.05) is None
    assert slower_host({"model": "tiny", "throughput": 1.0}, [replaced], 0.05) is None
    assert slower_host(ENTRY, [], 0.05) is None


def test_each_probe_names_the_first_reference_that_shows_it():
    history = ProbeReference("the median of its last 5 session(s) here (--dlperf-history),", 8.0, 40.0)
    replaced = ProbeReference("the entry it replaces,", 6.7, 50.0)
    assert slower_host(ENTRY, [history, replaced], 0.05) == (
        "memory bandwidth 6.7 GB/s, 16% below the median of its last 5 session(s) here (--dlperf-history), 8.0 GB/s; "
        "core speed 32.4 GFLOP/s, 19% below the median of its last 5 session(s) here (--dlperf-history), 40.0 GFLOP/s")


# A 50% tolerance (the tiny case's noise widens it to 90% at most on a loaded machine): a probe 1000 times
# lower than its reference shows whatever the load.
SAVE = ("--dlperf-model", "tiny", "--dlperf-batch-size", "16", "--dlperf-runs", "1", "--dlperf-tolerance", "0.5")


def faster(path, factor=1000.0):
    """The saved file's entry as if its minute had been a faster one: its core probe ``factor`` times higher
    (far beyond what a loaded machine varies)."""
    document = json.loads(path.read_text())
    for case in document["cases"]:
        case["core_gflops"] *= factor
    path.write_text(json.dumps(document))


def test_saving_over_an_entry_measured_in_a_faster_minute_says_so_and_notes_it(dlperf):
    result = dlperf.run(*SAVE, "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    assert "ran slower" not in result.stdout.str()
    saved = dlperf.path / "saved.json"
    first = json.loads(saved.read_text())["cases"][0]
    assert first["core_gflops"] > 0 and "ran slower" not in first.get("notes", "")
    faster(saved)

    result = dlperf.run(*SAVE, "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "dlperf: saved 1 case(s) as a baseline to saved.json",
        # The memory probe may be named first where the suite's other workers take the host's bandwidth.
        ("dlperf: --dlperf-save-baseline: tiny-fp32-bs16-gpu1 was measured while the host ran slower: *core speed "
         "* GFLOP/s, *% below the entry it replaces, * GFLOP/s; a slowdown that size can pass against its figure: "
         "save it again when the host is quieter, or from several sessions (dlperf baseline update FILE --from "
         "each session's results)")])
    entry = json.loads(saved.read_text())["cases"][0]
    assert "measured while the host ran slower: " in entry["notes"] and "core speed " in entry["notes"]

    # Another machine's file is no reference for this host's minute.
    document = json.loads(saved.read_text())
    document["hardware"]["cpu"] = "Some Other CPU 9000"
    saved.write_text(json.dumps(document))
    faster(saved)
    result = dlperf.run(*SAVE, "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    assert "ran slower" not in result.stdout.str()


def test_saving_in_a_slower_minute_than_the_history_stores_last_sessions_says_so(dlperf):
    url = f"sqlite:///{dlperf.path / 'history.db'}"
    dlperf.run(*SAVE, "--dlperf-history", url).assert_outcomes(passed=1)
    with sqlite3.connect(dlperf.path / "history.db") as conn:  # that session's minute, made a faster one
        conn.execute("UPDATE dlperf_cases SET core_gflops = core_gflops * 1000")

    result = dlperf.run(*SAVE, "--dlperf-history", url, "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        # The memory probe may be named first where the suite's other workers take the host's bandwidth (a fresh
        # clone's run, 2026-11-26: "memory bandwidth 4.2 GB/s, 56% below ...; core speed ...").
        ("dlperf: --dlperf-save-baseline: tiny-fp32-bs16-gpu1 was measured while the host ran slower: *core speed "
         "* GFLOP/s, *% below the median of its last 1 session(s) here (--dlperf-history), * GFLOP/s; *"
         "or judge against the store's last sessions (--dlperf-baseline-from-history 5)")])


def test_a_save_whose_every_run_was_busy_for_the_host_says_so_from_all_its_runs(dlperf, make_tiny_case):
    # Judged against an entry whose core probe no machine reaches, every run is busy for the host's sake and none
    # counts: the save compares the probes of all its runs.
    dlperf.baseline([make_tiny_case(1000.0, batch_size=16, tolerance=0.5, core_gflops=1e6)])
    result = dlperf.run("--dlperf-baseline", "baseline.json", "--dlperf-runs", "1", "--dlperf-max-runs", "2",
                        "--dlperf-save-baseline", "saved.json")
    result.stdout.fnmatch_lines([("dlperf: --dlperf-save-baseline: tiny-fp32-bs16-gpu1 was measured while the host "
                                  "ran slower: core speed * GFLOP/s, 100% below its baseline's 1000000.0 GFLOP/s; *")])
