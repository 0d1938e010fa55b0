"""MLPerf's own logs as command cases: a script logging through the real ``mlperf_logging.mllog``.

One inner session runs ``tests/commands/train_mllog.py`` (standard events of
``mlperf_logging.mllog.constants`` only) as command cases given in the baseline: its
throughput on 1 and 2 gloo ranks (a block per epoch, samples from ``train_samples``), and its
time to train on 2 ranks (run_start to run_stop with status success, two runs, gated against
the entry's ``time_to_target``); two cases registered in a conftest whose runs do not succeed
(status aborted, no run_stop).  The parser is also fed the logger's own lines in-process.
"""

from __future__ import annotations

import io
import logging

import pytest

from pytest_dlperf.cases import Case
from pytest_dlperf.commands import build_spec, parsers
from pytest_dlperf.commands.measure import Read, Run
from pytest_dlperf.launch.launchers import LocalLauncher
from pytest_dlperf.launch.workers import RunParams
from pytest_dlperf.commands.train_time import run_figures
from tests.test_commands import SCRIPTS

mllog = pytest.importorskip("mlperf_logging.mllog")

SCRIPT = str(SCRIPTS / "train_mllog.py")
THROUGHPUT = {"argv": ["{python}", SCRIPT, "{global_batch}", "{steps}"], "parser": "mllog"}
TIME_TO_TRAIN = {"argv": ["{python}", SCRIPT, "{global_batch}", "10", "--target", "0.9", "--seed", "{seed}"],
                 "parser": "mllog", "figure": "time_to_train"}
CONFTEST = f"""
import sys
from pytest_dlperf import register_command

for name, extra in (("aborts", ["--target", "1.5"]), ("nostop", ["--no-stop"])):
    register_command(name, [sys.executable, {SCRIPT!r}, "{{global_batch}}", "2", *extra], parser="mllog",
                     figure="time_to_train", unit="samples/s", batch_size=64)
"""


def _setup(dlperf) -> None:
    dlperf.pytester.makeconftest(CONFTEST)
    dlperf.baseline([
        {"model": "mlperf", "precision": "fp32", "batch_size": 32, "gpus": 1, "throughput": 1.0, "unit": "samples/s",
         "command": THROUGHPUT},
        {"model": "mlperf", "precision": "fp32", "batch_size": 32, "gpus": 2, "throughput": 1.0, "unit": "samples/s"},
        {"model": "mlperf-ttt", "precision": "fp32", "batch_size": 32, "gpus": 2, "time_to_target": 1000.0,
         "tolerance": 0.5, "seeds": 2, "unit": "samples/s", "command": TIME_TO_TRAIN},
    ], schema_version=2)


@pytest.fixture
def session(shared_run):
    return shared_run("mlperf", "--dlperf-baseline", "baseline.json", "--dlperf-model", "aborts,nostop",
                      "--dlperf-batch-size", "64", "--dlperf-json", "results.json", "--dlperf-report", "report.md",
                      "--dlperf-max-runs", "1", "-rf",
                      # Fewer epochs than FAST's 12: warm-up 1 + 2 windows of 2 (each epoch 32 steps of every rank).
                      "--dlperf-warmup-steps", "1", "--dlperf-steps", "2", setup=_setup)


def _cases(run) -> dict[str, dict]:
    return {c["id"]: c for c in run.tester.results()["cases"]}


def test_throughput_from_blocks_on_one_and_two_gloo_ranks(session):
    cases = _cases(session)
    one, two = cases["mlperf-fp32-bs32-gpu1"], cases["mlperf-fp32-bs32-gpu2"]
    assert one["verdict"] == two["verdict"] == "improved", session.result.stdout.str()
    for case, global_batch in ((one, 32), (two, 64)):
        run = case["attempts"][0]["runs"][0]
        # {steps} epochs of 32 steps, a block each: warm-up 1 + 2 x 2 windows (the session's, FAST's repeats);
        # one block holds train_samples (32 x the global batch) samples.
        assert run["command"]["argv"][-2:] == [str(global_batch), "5"] and run["command"]["method"] == "windows"
        assert [w["steps"] for w in run["windows"]] == [2, 2]
        assert all(w["samples"] == 2 * 32 * global_batch for w in run["windows"])
        assert case["throughput"] > 100
    # Only rank 0 logs (as MLPerf's references do): the job's figure is its.
    assert [r["rank"] for r in two["attempts"][0]["runs"][0]["ranks"]] == []
    assert two["scaling"]["reference_source"] == "this session"


def test_time_to_train_on_two_gloo_ranks_is_gated_against_the_baseline(session):
    case = _cases(session)["mlperf-ttt-fp32-bs32-gpu2"]
    assert case["verdict"] == "improved" and case["unit"] == "s"
    figures = case["convergence"]
    assert figures["runs"] == figures["reached"] == 2 and figures["goal"]["reads"] == "run_stop with status success"
    runs = case["attempts"][0]["runs"]
    # {seed} is the run's index; each run's time is its run_stop less its run_start, shorter than the run.
    assert [r["command"]["argv"][-1] for r in runs] == ["0", "1"]
    for run in runs:
        ttt = run["convergence"]
        assert run["command"]["method"] == "time_to_train" and ttt["reached"] and ttt["stopped"] == "success"
        assert 0 < ttt["seconds_to_target"] < run["wall_seconds"]
        assert ttt["final"] >= 0.9 and ttt["curve"][-1]["eval_accuracy"] == ttt["final"]
        assert ttt["samples"] == ttt["epochs"] * 32 * 64  # blocks of train_samples each, to the last eval
    times = [r["convergence"]["seconds_to_target"] for r in runs]
    assert figures["seconds_to_target"] == pytest.approx(sum(times) / 2)  # the median of two
    assert "faster than the baseline 1000.0 s" in case["message"]
    assert "| mlperf-ttt-fp32-bs32-gpu2 | improved | run_stop with status success | 2/2 |" in \
        (session.tester.path / "report.md").read_text()


def test_a_run_aborted_or_without_run_stop_fails_saying_so(session):
    session.result.assert_outcomes(passed=3, failed=2)
    text = session.result.stdout.str()
    assert ("aborts-fp32-bs64-gpu1: target not reached in 1 of 1 run (seed 0): eval_accuracy ") in text
    assert "stopped: run_stop with status 'aborted'); goal run_stop with status success" in text
    assert "nostop-fp32-bs64-gpu1: target not reached in 1 of 1 run (seed 0): run_stop n/a at the end" in text
    assert "stopped: the log has no run_stop)" in text
    cases = _cases(session)
    # The first run that does not succeed is the last: the case's second seed is not started.
    assert len(cases["aborts-fp32-bs64-gpu1"]["attempts"][0]["runs"]) == 1


def test_an_entry_whose_figure_is_not_its_commands_is_one_line_before_any_case_runs(dlperf):
    dlperf.pytester.makeconftest(CONFTEST)
    entry = {"model": "aborts", "precision": "fp32", "batch_size": 64}
    for fields, where, message in (
            ({"throughput": 10.0}, "$.cases[0].throughput",
             "'aborts' is a time-to-train command (figure 'time_to_train'): its entries give time_to_target"),
            ({"model": "mlperf", "time_to_target": 10.0, "command": THROUGHPUT}, "$.cases[0].time_to_target",
             "time_to_target without a target is a time-to-train command's; 'mlperf' is not one"),
            ({"time_to_target": 10.0, "target": {"metric": "top1", "value": 0.9}, "budget": {"epochs": 1}},
             "$.cases[0].model", "a target is for the built-in convergence cases; a command trains to its own")):
        dlperf.baseline([{**entry, **fields}], name="bad.json", schema_version=2)
        refused = dlperf.run("--co", "--dlperf-baseline", "bad.json")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in refused.stderr.str()
        (line,) = [x for x in refused.stderr.str().splitlines() if "bad.json" in x]
        assert f"bad.json: {where}: " in line and message in line, line
    # A time to target makes the baseline version 2, as a target does.
    dlperf.baseline([{**entry, "time_to_target": 10.0}], name="v1.json")
    old = dlperf.run("--co", "--dlperf-baseline", "v1.json")
    assert old.ret == pytest.ExitCode.USAGE_ERROR and "schema_version" in old.stderr.str()


# --------------------------------------------------------------------------- in-process: the logger's own lines


def _logger() -> tuple[object, io.StringIO]:
    out = io.StringIO()
    logger = logging.getLogger(f"mllog-test-{id(out)}")
    logger.propagate = False
    logger.addHandler(logging.StreamHandler(out))
    logger.setLevel(logging.INFO)
    return mllog.mllog.MLLogger(logger=logger), out


def test_mllog_reads_blocks_epochs_and_marks_from_the_loggers_own_lines():
    c = mllog.constants
    logger, out = _logger()
    logger.event(key=c.TRAIN_SAMPLES, value=1000, time_ms=0)
    logger.start(key=c.RUN_START, time_ms=1_000)
    for first, start, stop in ((1, 1_000, 3_000), (3, 3_000, 5_500)):
        logger.start(key=c.BLOCK_START, metadata={c.FIRST_EPOCH_NUM: first, c.EPOCH_COUNT: 2}, time_ms=start)
        for epoch in (first, first + 1):  # epochs inside a block: the block is the step
            logger.start(key=c.EPOCH_START, metadata={c.EPOCH_NUM: epoch}, time_ms=start)
            logger.end(key=c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch}, time_ms=stop)
        logger.end(key=c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: first}, time_ms=stop)
        logger.event(key=c.EVAL_ACCURACY, value=0.5 + first / 10, metadata={c.EPOCH_NUM: first + 1}, time_ms=stop)
    logger.end(key=c.RUN_STOP, metadata={c.STATUS: c.SUCCESS}, time_ms=5_750)
    records, marks = parsers.make("mllog", {}).parse(out.getvalue().splitlines())
    assert records == [parsers.Record(step_time=2.0, step=1, samples=2000, kind="block"),
                       parsers.Record(step_time=2.5, step=3, samples=2000, kind="block")]
    figures = run_figures(0, Read(records, marks, None), wall_seconds=9.0)
    assert figures.reached and figures.seconds_to_target == 4.75 and figures.samples == 4000
    assert [(p["seconds"], p["samples"], p["eval_accuracy"]) for p in figures.curve] == [(2.0, 2000, 0.6),
                                                                                         (4.5, 4000, 0.8)]
    # Without blocks, each epoch is a step; a running samples_count (MLPerf's LLM benchmarks) counts a block.
    epochs, _ = parsers.make("mllog", {}).parse(line for line in out.getvalue().splitlines() if "block_" not in line)
    assert [r.kind for r in epochs] == ["epoch"] * 4 and epochs[0].samples == 1000
    logger, out = _logger()
    logger.start(key=c.BLOCK_START, metadata={"samples_count": 0}, time_ms=0)
    logger.end(key=c.BLOCK_STOP, metadata={"samples_count": 512}, time_ms=400)
    logger.start(key=c.BLOCK_START, metadata={c.FIRST_EPOCH_NUM: 0, c.EPOCH_COUNT: 1}, time_ms=400)
    logger.end(key=c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: 0}, time_ms=800)
    parser = parsers.make("mllog", {})
    counted, _ = parser.parse(out.getvalue().splitlines())
    assert [r.samples for r in counted] == [512, None]
    assert "no train_samples event" in parser.missing(counted)
    assert parsers.make("mllog", {"samples": 64}).parse(out.getvalue().splitlines())[0][1].samples == 64


def test_mllog_status_and_the_tracked_stats_form(tmp_path):
    c = mllog.constants
    logger, out = _logger()
    logger.event(key=c.GLOBAL_BATCH_SIZE, value=256, time_ms=0)
    logger.start(key=c.RUN_START, time_ms=0)
    logger.event(key="tracked_stats", value={"throughput": 812.5}, metadata={"step": 4}, time_ms=10)
    logger.start(key=c.BLOCK_START, metadata={c.FIRST_EPOCH_NUM: 1, c.EPOCH_COUNT: 1}, time_ms=10)
    logger.end(key=c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: 1}, time_ms=20)
    logger.end(key=c.RUN_STOP, metadata={c.STATUS: c.ABORTED}, time_ms=3_000)
    parser = parsers.make("mllog", {})
    records, marks = parser.parse(out.getvalue().splitlines())
    assert records == [parsers.Record(throughput=812.5, step=4, kind="key")]  # the tracked_stats form wins
    # The global batch it logged, against the case's: a script that ignores {batch_size} is noted.
    run = Run(build_spec("m", command=["x"], parser="mllog"), Case.make("m", "fp32", 32, 2), RunParams(device="cpu"),
              tmp_path, LocalLauncher())
    assert run.batch_note({0: Read(records, marks, None, global_batch=64)}) == []
    assert run.batch_note({0: Read(records, marks, None, global_batch=parser.global_batch)}) == [
        "the script logged global_batch_size 256; the case's global batch is 64 (32 x 2)"]
    aborted = run_figures(3, Read(records, marks, None), wall_seconds=5.0)
    assert not aborted.reached and aborted.stopped == "run_stop with status 'aborted'" and aborted.seconds == 3.0
    # A time to train the script works out itself: a regex's group, a DLLogger summary's key.
    regex = parsers.make("regex", {"pattern": r"time to train: (?P<time_to_train>[\d.]+) s \((?P<status>\w+)\)"})
    (mark,) = regex.parse_line("time to train: 812.4 s (success)")
    assert mark == parsers.Mark(parsers.Milestone.TIME_TO_TRAIN, value=812.4, status="success")
    dll = parsers.make("dllogger", {"time_to_train_key": "e2e_train_time"})
    assert dll.parse_line('DLLL {"step": [], "data": {"e2e_train_time": 99.5}}') == [
        parsers.Mark(parsers.Milestone.TIME_TO_TRAIN, value=99.5)]
