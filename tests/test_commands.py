"""Command cases: other people's training scripts (tests/commands/, which import nothing of pytest-dlperf) as cases.

Two inner sessions run real scripts: one with the good paths (DLLogger, MLPerf's mllog, plain text on
two ranks through torchrun, a transformers Trainer), one with the failures (a crash, an
out-of-memory error, a log with nothing usable).  The parsers, the windows and the checks of
a registration are fed controlled lines in-process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_dlperf.cases import Case
from pytest_dlperf.commands import build_spec, parsers
from pytest_dlperf.commands.follow import LogFollower
from pytest_dlperf.commands.measure import combine_ranks, windows_of
from pytest_dlperf.launch.workers import RunParams

SCRIPTS = Path(__file__).parent / "commands"


def _register(name: str, script: str, *args: str, **fields) -> str:
    return (f"register_command({name!r}, [sys.executable, {str(SCRIPTS / script)!r}, "
            f"{', '.join(map(repr, args))}], **{fields!r})\n")


CONFTEST_HEAD = "import sys\nfrom pytest_dlperf import register_command\n"
GOOD = CONFTEST_HEAD + "".join([
    _register("dll", "train_dllogger.py", "--batch-size", "{batch_size}", "--steps", "{steps}", "--data-ms", "200",
              parser="dllogger", precisions={"fp32": [], "bf16": ["--amp"]}),
    _register("plain", "train_plain.py", "{batch_size}", "{steps}", scope="rank", batch_size=16,
              pattern=r"\[rank (?P<rank>\d+)\] iter (?P<step>\d+) .*batch_cost (?P<step_time>[\d.]+) s"),
    _register("hf", "train_hf_trainer.py", "{batch_size}", "{steps}", "{run_dir}/trainer", parser="final",
              unit="samples/s", batch_size=8, env={"HF_HUB_OFFLINE": "1"},
              pattern=r"'train_samples_per_second': '?(?P<throughput>[\d.]+)"),
])
BAD = CONFTEST_HEAD + "".join([
    _register("crash", "train_crash.py", pattern=r"batch_cost (?P<step_time>[\d.]+)"),
    _register("oom", "train_crash.py", "oom", pattern=r"batch_cost (?P<step_time>[\d.]+)"),
    _register("silent", "train_silent.py", pattern=r"ips: (?P<throughput>[\d.]+)"),
])


#: A DLLogger script's phases, seconds per step (its data time and compute time): its batches came at once, and its
#: step under bf16 autocast took about what it takes on this CPU (70 ms).  Now each batch takes 200 ms more.
DLLOGGER_PHASES = {"step": 0.07, "data": 0.0001, "compute": 0.0699, "other": 0.0}


def _good(dlperf) -> None:
    dlperf.pytester.makeconftest(GOOD)
    dlperf.baseline([
        # Its phases as a script of the same log gave them, the batches then at once (DLLOGGER_PHASES).
        {"model": "dll", "precision": "bf16", "batch_size": 32, "throughput": 1e9, "unit": "img/s",
         "phases": DLLOGGER_PHASES},
        # A command case given in the baseline itself (schema_version 2), not in a conftest.
        {"model": "ml", "precision": "fp32", "batch_size": 64, "throughput": 1.0, "unit": "samples/s",
         "command": {"argv": ["{python}", str(SCRIPTS / "train_mllog.py"), "{global_batch}", "{steps}"],
                     "parser": "mllog"}},
        {"model": "plain", "precision": "fp32", "batch_size": 16, "gpus": 2, "throughput": 1.0, "unit": "img/s"},
        # The 2-rank case's scaling reference, from the baseline: deselected below, so not measured.
        {"model": "plain", "precision": "fp32", "batch_size": 16, "gpus": 1, "throughput": 1000.0, "unit": "img/s"},
        {"model": "hf", "precision": "fp32", "batch_size": 8, "throughput": 1.0, "unit": "samples/s"},
    ], schema_version=2)


@pytest.fixture
def good(shared_run):
    return shared_run("commands-good", "--dlperf-baseline", "baseline.json", "--dlperf-json", "results.json",
                      "-k", "not plain-fp32-bs16-gpu1", "--dlperf-max-runs", "1", "--dlperf-save-baseline", "saved.json",
                      setup=_good)


def _cases(run) -> dict[str, dict]:
    return {c["id"]: c for c in run.tester.results()["cases"]}


def test_command_cases_are_judged_like_built_in_ones(good):
    good.result.assert_outcomes(passed=3, failed=1)
    text = good.result.stdout.str()
    # The DLLogger script against an unreachable baseline: a regression, in the usual words.
    assert "FAILED dlperf::dll-bf16-bs32-gpu1 - FAIL dll-bf16-bs32-gpu1:" in text and "% below " in text
    cases = _cases(good)
    assert set(cases) == {"dll-bf16-bs32-gpu1", "ml-fp32-bs64-gpu1", "plain-fp32-bs16-gpu2", "hf-fp32-bs8-gpu1"}
    assert cases["ml-fp32-bs64-gpu1"]["verdict"] == "improved"


def test_the_results_keep_the_command_line_and_the_method(good):
    cases = _cases(good)
    dll = cases["dll-bf16-bs32-gpu1"]["attempts"][0]["runs"][0]
    # {precision_args} is appended (bf16 -> --amp); {steps} is warm-up + steps x repeats of FAST (2 + 5 x 2).
    assert dll["command"]["argv"][1:] == [str(SCRIPTS / "train_dllogger.py"), "--batch-size", "32", "--steps", "12",
                                          "--data-ms", "200", "--amp"]
    assert dll["command"]["method"] == "windows" and [w["steps"] for w in dll["windows"]] == [5, 5]
    ml = cases["ml-fp32-bs64-gpu1"]
    assert ml["stats"]["n"] == 2 and ml["unit"] == "samples/s"
    hf = cases["hf-fp32-bs8-gpu1"]
    assert hf["attempts"][0]["runs"][0]["command"]["method"] == "final"
    assert "one final figure per run" in hf["message"] and hf["throughput"] > 0
    # The same run's tqdm bar (stderr), as the tqdm parser reads a Trainer's: one step per iteration, all {steps}.
    bar = Path(hf["attempts"][0]["runs"][0]["log_dir"]) / "stderr.log"
    with open(bar, encoding="utf-8", errors="replace") as log:
        steps = parsers.make("tqdm", {}).parse(log)[0]
    assert [r.step for r in steps] == list(range(1, 13)) and all(r.step_time > 0 for r in steps)


def test_a_dllogger_script_s_data_time_gives_the_case_its_phases(good):
    dll = _cases(good)["dll-bf16-bs32-gpu1"]
    # Each step waits 200 ms for its batch (--data-ms): its train.data_time, on a line of its own as
    # DeepLearningExamples' ConvNets trainer logs it.  The case's phases are the log's: data, compute and the rest.
    assert set(dll["phases"]) == {"step", "data", "compute", "other"}, dll.get("phases")
    timed = dll["phases"]
    assert timed["data"] >= 0.18 and timed["data"] + timed["compute"] <= timed["step"] * (1 + 1e-9)
    windows = dll["attempts"][0]["runs"][0]["windows"]
    assert all(set(w["phases"]) == {"data", "compute"} for w in windows)
    # Its FAIL names the phase that moved against the baseline's (DLLOGGER_PHASES): the wait for data.
    assert "where the time went: data +" in dll["message"]
    saved = json.loads((good.tester.path / "saved.json").read_text())
    (entry,) = [e for e in saved["cases"] if e["model"] == "dll"]
    assert set(entry["phases"]) == {"step", "data", "compute", "other"}


def test_two_ranks_through_torchrun_each_log_their_own_steps(good):
    plain = _cases(good)["plain-fp32-bs16-gpu2"]
    run = plain["attempts"][0]["runs"][0]
    assert run["command"]["argv"][1:] == [str(SCRIPTS / "train_plain.py"), "16", "12"]
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    # scope "rank": the job's window is the sum of the ranks' windows.
    first = [r["windows"][0]["throughput"] for r in run["ranks"]]
    assert run["windows"][0]["throughput"] == pytest.approx(sum(first))
    assert [r["rank"] for r in plain["ranks"]] == [0, 1]


def test_a_saved_baseline_keeps_the_commands_the_baseline_gave_not_a_conftests(good):
    saved = json.loads((good.tester.path / "saved.json").read_text())
    commands = {entry["model"]: entry.get("command") for entry in saved["cases"]}
    # ml's command came from the baseline; dll, plain and hf were registered in the conftest, which registers
    # them again wherever the saved file is used (docs/commands.md, "Registering one").
    assert commands == {"ml": {"argv": ["{python}", str(SCRIPTS / "train_mllog.py"), "{global_batch}", "{steps}"],
                               "parser": "mllog"}, "dll": None, "plain": None, "hf": None}


def test_a_baseline_saved_from_a_baseline_given_command_keeps_the_command(good, dlperf):
    command = {"argv": ["{python}", str(SCRIPTS / "train_mllog.py"), "{global_batch}", "{steps}"], "parser": "mllog"}
    # The good session saved saved.json from baseline.json, whose ml entry gives its command.  It says so: the saved
    # file's command runs only where a session trusts that file (docs/baselines.md).
    assert ("dlperf: saved 4 case(s) as a baseline to saved.json; it keeps the command of ml, which this session ran: "
            "a session runs it where it trusts the file (inside its rootdir, or --dlperf-trust-commands)") \
        in good.result.stdout.str()
    saved = json.loads((good.tester.path / "saved.json").read_text())
    (entry,) = [e for e in saved["cases"] if e["model"] == "ml"]
    assert entry["command"] == command and saved["schema_version"] == 2
    # The saved file alone runs the case again: the command came along (the conftest registers dll, plain and hf;
    # nothing here registers ml).
    # (Measured and judged against it: pass or fail is the machine's business here, with other tests beside it.)
    # One run: any verdict will do here, an undecided one too (up to 10 fresh commands otherwise; each run starts
    # the script, torch's import included, afresh).  Its {steps} epochs as few as a window needs: 1 + 1 x 2, not 12.
    dlperf.pytester.makeconftest(GOOD)
    (dlperf.path / "saved-again.json").write_text(json.dumps(saved))
    again = dlperf.run("--dlperf-baseline", "saved-again.json", "-k", "ml-fp32-bs64-gpu1",
                       "--dlperf-json", "again.json", "--dlperf-max-runs", "1",
                       "--dlperf-warmup-steps", "1", "--dlperf-steps", "1")
    assert again.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), again.stdout.str()
    (case,) = dlperf.results("again.json")["cases"]
    # Judged: any verdict the gate gives, inconclusive too (seen beside other test workers: 5 runs undecided).
    assert case["id"] == "ml-fp32-bs64-gpu1" and case["verdict"] in ("pass", "improved", "fail", "inconclusive")
    assert case["throughput"] > 0 and case["baseline"]["source"].startswith("measured by pytest-dlperf on ")
    assert case["baseline"]["throughput"] == entry["throughput"]  # against the saved file's figure


def test_failing_scripts_fail_their_case_with_the_reason_and_the_log(dlperf):
    dlperf.pytester.makeconftest(BAD)
    result = dlperf.run("--dlperf-model", "crash,oom,silent")
    result.assert_outcomes(failed=3)
    text = result.stdout.str()
    assert "crash-fp32-bs32-gpu1: the command ended with exit status 1" in text
    assert "RuntimeError: the data pipeline lost its shard" in text  # the log's last lines
    assert "oom-fp32-bs32-gpu1: out of memory at batch size 32" in text
    assert ("silent-fp32-bs32-gpu1: the regex parser found no usable line in the command's log: it looked for "
            "lines matching 'ips: (?P<throughput>[\\\\d.]+)'") in text
    assert "epoch 0 step 4: loss=" in text
    # Selection by markers works as for built-in cases; a precision the command maps no arguments for is
    # a usage error before any case runs.
    dlperf.pytester.makeconftest(GOOD)
    selected = dlperf.run("--co", "-q", "--dlperf-model", "dll,plain", "--dlperf-precision", "fp32,bf16",
                          "-m", "bf16 and dll")
    assert "dlperf::dll-bf16-bs32-gpu1" in selected.stdout.str() and "3 deselected" in selected.stdout.str()
    dlperf.baseline([{"model": "b", "precision": "fp32", "batch_size": 8, "throughput": 1.0,
                      "command": {"argv": ["train.py", "{batchsize}"]}}], name="bad.json", schema_version=2)
    bad = dlperf.run("--co", "--dlperf-baseline", "bad.json")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in bad.stderr.str()
    assert ("bad.json: $.cases[0].command: command 'b': command argument '{batchsize}': unknown placeholder "
            "{batchsize}") in bad.stderr.str()
    refused = dlperf.run("--co", "--dlperf-model", "dll", "--dlperf-precision", "amp")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--dlperf-model: dll-amp-bs32-gpu1: command 'dll' has no arguments for precision 'amp'; its "
            "precisions: fp32, bf16") in refused.stderr.str()
    assert "Traceback" not in refused.stderr.str()


# --------------------------------------------------------------------------- in-process: parsers, windows, checks


def test_dllogger_reads_steps_and_the_summary_and_skips_the_rest():
    parser = parsers.make("dllogger", {})
    lines = ['DLLL {"step": "PARAMETER", "data": {"train.total_ips": 5}}',
             'DLLL {"step": [1, 3], "data": {"train.total_ips": 250.0, "train.loss": 2.1}}',
             'DLLL {"step": [1], "data": {"train.total_ips": 999}}',
             'DLLL {"step": [], "data": {"train.total_ips": 240.5}}', "DLL 2024 - (1, 3) train.loss : 2.1", "DLLL {bad"]
    records = [r for line in lines for r in parser.parse_line(line)]
    assert records == [parsers.Record(throughput=250.0, step=3), parsers.Record(throughput=240.5, final=True)]
    timed = parsers.make("dllogger", {"time_key": "train.compute_time"})
    assert timed.parse_line('DLLL {"step": [0, 7], "data": {"train.compute_time": 0.25}}') == [
        parsers.Record(step_time=0.25, step=7)]


#: DeepLearningExamples' ConvNets trainer through dllogger's JSONStreamBackend (PyTorch/Classification/ConvNets/
#: image_classification/logger.py): per step a line of its default metrics and one of its verbose ones (data_time,
#: compute_time, in seconds), in the order of its set of verbosity levels; a summary line has step [].
DLE_LINES = [
    'DLLL {"timestamp": "1712217600.118", "datetime": "2024-04-04 08:00:00.118", "elapsedtime": "41.2", '
    '"type": "LOG", "step": [0, 20], "data": {"train.loss": 6.8125, "train.compute_ips": 2437.11, '
    '"train.total_ips": 2301.9, "train.lr": 0.256, "train.grad_scale": 128.0}}',
    'DLLL {"timestamp": "1712217600.118", "datetime": "2024-04-04 08:00:00.118", "elapsedtime": "41.2", '
    '"type": "LOG", "step": [0, 20], "data": {"train.data_time": 0.00619, "train.compute_time": 0.105}}',
    'DLLL {"timestamp": "1712217602.31", "datetime": "2024-04-04 08:00:02.310", "elapsedtime": "43.4", '
    '"type": "LOG", "step": [0, 40], "data": {"train.data_time": 0, "train.compute_time": 0.1112}}',
    'DLLL {"timestamp": "1712217602.31", "datetime": "2024-04-04 08:00:02.310", "elapsedtime": "43.4", '
    '"type": "LOG", "step": [0, 40], "data": {"train.loss": 6.75, "train.total_ips": 2300.1}}',
    'DLLL {"timestamp": "1712217604.5", "datetime": "2024-04-04 08:00:04.500", "elapsedtime": "45.6", '
    '"type": "LOG", "step": [0, 60], "data": {"train.loss": 6.7, "train.total_ips": 2310.0}}',
    'DLL 2024-04-04 08:00:04.500 - Epoch: 0 Iteration: 60  train.loss : 6.70000  train.total_ips : 2310.00 images/s',
    'DLLL {"timestamp": "1712217610.0", "datetime": "2024-04-04 08:00:10.000", "elapsedtime": "51.1", '
    '"type": "LOG", "step": [], "data": {"train.total_ips": 2304.2}}',
]


def test_dllogger_reads_a_step_s_data_and_compute_time_from_the_line_of_its_own():
    steps, _ = parsers.make("dllogger", {}).parse(DLE_LINES)
    assert [(r.step, r.throughput, r.phases) for r in steps if not r.final] == [
        (20, 2301.9, parsers.StepPhases(data=0.00619, compute=0.105)),  # the verbose line after its step's
        (40, 2300.1, parsers.StepPhases(data=0.0, compute=0.1112)),  # before it; a data time of 0 is one
        (60, 2310.0, None)]  # none logged
    # The phases of a window are its steps' means, where every step has them; keys set empty read none.
    timed = [r for r in steps if r.phases is not None]
    (window,) = windows_of(timed, warmup=0, steps=2, repeats=1, samples_per_step=256)
    assert window["phases"] == pytest.approx({"data": 0.003095, "compute": 0.1081})
    assert "phases" not in windows_of(steps[:3], warmup=0, steps=3, repeats=1, samples_per_step=256)[0]
    unread, _ = parsers.make("dllogger", {"data_time_key": "", "compute_time_key": ""}).parse(DLE_LINES)
    assert [r.phases for r in unread] == [None] * 4
    # A log's phases never add up to more than its step (samples over the logged rate): scaled down together.
    late = [parsers.Record(throughput=100.0, phases=parsers.StepPhases(data=0.3, compute=0.1))]
    assert windows_of(late, 0, 1, 1, 20)[0]["phases"] == pytest.approx({"data": 0.15, "compute": 0.05})


def test_a_verbose_line_is_no_logged_step_while_the_log_is_followed(tmp_path):
    log = tmp_path / "dllogger.json"
    log.write_text("\n".join(DLE_LINES[:4]) + "\n")
    follower = LogFollower(lambda: [log], lambda: parsers.make("dllogger", {}), expected_steps=2, startup=60.0)
    follower.poll()
    assert follower.steps == 2 and follower.measured([[log]])
    ranks = {0: [{"steps": 2, "samples": 8, "seconds": 1.0, "throughput": 8.0, "phases": {"data": 0.1}}],
             1: [{"steps": 2, "samples": 8, "seconds": 2.0, "throughput": 4.0, "phases": {"data": 0.6}}]}
    assert combine_ranks(ranks, "global", 2)[0][0]["phases"] == {"data": 0.6}  # the slowest rank's


def test_regex_and_final_parsers():
    # (mllog: tests/test_mlperf_commands.py, on the lines of mlperf_logging's own logger.)
    # A PaddleClas-style line: throughput wins over the step time on the same line.
    regex = parsers.make("regex", {"pattern": r"batch_cost: (?P<step_time>[\d.]+)s.*ips: (?P<throughput>[\d.]+)"})
    line = "[Train][Epoch 1/1][Iter: 9/10] batch_cost: 0.21s, ips: 1212.3 samples/s"
    assert regex.parse_line(line) == [parsers.Record(throughput=1212.3)]
    # The documented OneFlow-Benchmark pattern, on its line (docs/trainers.md).
    oneflow = parsers.make("regex", {"pattern": r"train: epoch \d+, iter (?P<step>\d+),.*samples/s: (?P<throughput>[\d.]+)"})
    line = "train: epoch 0, iter 100, loss: 6.906000, top_1: 0.001000, top_k: 0.005000, samples/s: 1236.870 1593398285.12"
    assert oneflow.parse_line(line) == [parsers.Record(throughput=1236.87, step=100)]
    final = parsers.make("final", {"pattern": r"samples_per_second': '?(?P<throughput>[\d.]+)"})
    assert final.parse_line("{'train_samples_per_second': '54.88'}") == [parsers.Record(throughput=54.88, final=True)]


def test_windows_are_samples_over_seconds_after_the_warm_up():
    records = [parsers.Record(throughput=1000.0)] * 2 + [parsers.Record(throughput=100.0),
                                                         parsers.Record(throughput=300.0)] * 2
    windows = windows_of(records, warmup=2, steps=2, repeats=3, samples_per_step=30)
    # 60 samples over 0.3 + 0.1 s: 150/s, not the mean of the rates (200/s); the third window is incomplete.
    assert [w["throughput"] for w in windows] == pytest.approx([150.0, 150.0])
    timed = windows_of([parsers.Record(step_time=0.5)] * 3, warmup=1, steps=2, repeats=1, samples_per_step=8)
    assert timed == [{"steps": 2, "samples": 16, "seconds": 1.0, "throughput": 16.0}]
    ranks = {0: [{"steps": 2, "samples": 8, "seconds": 1.0, "throughput": 8.0}],
             1: [{"steps": 2, "samples": 8, "seconds": 2.0, "throughput": 4.0}]}
    assert combine_ranks(ranks, "rank", 2)[0][0]["throughput"] == 12.0
    assert combine_ranks(ranks, "global", 2)[0][0]["throughput"] == 6.0


def test_placeholders_fill_the_command_line():
    spec = build_spec("ngc-rn50", command=["{python}", "./main.py", "-b", "{batch_size}", "--prof", "{steps}",
                                           "{precision_args}", "--data", "{data_dir}", "--size={image_size}"],
                      parser="dllogger", precisions={"amp": ["--amp", "--static-loss-scale", "128"], "fp32": []},
                      defaults={"image_size": 224})
    params = RunParams(device="cuda", warmup_steps=20, steps=100, repeats=5, data_dir="/data")
    argv = spec.argv(Case.make("ngc-rn50", "amp", 256, 8), params, "/tmp/run0")
    assert argv == [sys.executable, "./main.py", "-b", "256", "--prof", "520", "--amp", "--static-loss-scale", "128",
                    "--data", "/data", "--size=224"]
    assert spec.samples(Case.make("ngc-rn50", "amp", 256, 8), params, "/tmp") == 2048


@pytest.mark.parametrize(("fields", "message"), [
    ({"command": ["train.py", "--bs={batch}"]},
     "command 'x': command argument '--bs={batch}': unknown placeholder {batch}; known: {batch_size}"),
    ({"command": "python train.py"}, "command 'x': command must be a non-empty list of strings"),
    ({"command": ["t.py"], "pattern": "ips ([0-9]+)"},
     "command 'x': pattern 'ips ([0-9]+)' needs a named group (?P<throughput>...) or (?P<step_time>...)"),
    ({"command": ["t.py"], "parser": "json"},
     "command 'x': unknown parser 'json'; expected one of dllogger, mllog, regex, final"),
    ({"command": ["t.py"], "parser": "dllogger", "keys": "x"}, "command 'x': parser 'dllogger' has no option 'keys'"),
    ({"command": ["t.py"], "parser": "mllog", "precisions": {"fp16": []}},
     "command 'x': precisions key must be one of fp32, tf32, amp, bf16, not 'fp16'"),
    ({"command": ["t.py"], "pattern": "ips (?P<throughput>[0-9]+)", "figure": "time_to_train"},
     "command 'x': figure 'time_to_train': pattern 'ips (?P<throughput>[0-9]+)' needs a named group "
     "(?P<time_to_train>...) (seconds)"),
    ({"command": ["t.py"], "pattern": "took (?P<time_to_train>[0-9]+)"},
     "command 'x': figure 'throughput': pattern 'took (?P<time_to_train>[0-9]+)' needs a named group (?P<throughput>"),
    ({"command": ["t.py"], "parser": "dllogger", "figure": "time_to_train"},
     "command 'x': figure 'time_to_train': parser 'dllogger' reads a time to train from its summary line's "
     "time_to_train_key: give it"),
    ({"command": ["t.py"], "parser": "final", "pattern": "(?P<throughput>[0-9]+)", "figure": "time_to_train"},
     "command 'x': figure 'time_to_train': parser 'final' reads no time to train"),
    ({"command": ["t.py"], "parser": "mllog", "figure": "accuracy"},
     "command 'x': figure 'accuracy': figure must be one of throughput, time_to_train"),
    ({"command": ["t.py"], "parser": "mllog", "samples": "{global_bs}"},
     "command 'x': samples: command argument '{global_bs}': unknown placeholder {global_bs}"),
    ({"command": ["t.py"], "parser": "mllog", "startup_timeout": 0},
     "command 'x': startup_timeout must be a positive number of seconds, not 0"),
])
def test_a_registration_mistake_is_one_line_naming_the_command_and_field(fields, message):
    with pytest.raises(ValueError) as raised:
        build_spec("x", **fields)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_results_json_of_a_command_case_is_schema_valid(good):
    from pytest_dlperf import jsonio

    path = good.tester.path / "results.json"
    assert jsonio.load(path, "results")["cases"]
    assert json.loads(path.read_text())["cases"][0]["attempts"][0]["runs"][0]["command"]["parser"]
