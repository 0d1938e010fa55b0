"""The trainers' named parsers, the units a ``regex`` step may be in, ``register_parser``'s two forms, and the
docs' registrations run as written (docs/trainers.md, docs/commands.md).

All in-process: each parser is fed lines in its trainer's published format, written here (and, for tqdm, drawn
by the real ``tqdm``); the case that a script never stops by itself is tests/test_command_faults.py's.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from pytest_dlperf import models
from pytest_dlperf.commands import build_spec, follow, parsers
from pytest_dlperf.commands.measure import windows_of

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "trainers.md"


def _steps(name: str, lines: list[str], **options) -> list[parsers.Record]:
    return parsers.make(name, options).parse(lines)[0]


# --------------------------------------------------------------------------- each trainer's line


def test_torchtitan_reads_tps_past_its_colours():
    line = ("\x1b[31mstep: 10  \x1b[32mloss:  7.1234  \x1b[33mmemory: 31.42GiB(39.67%)  \x1b[34mtps: 12,345  "
            "\x1b[36mtflops: 56.78  \x1b[35mmfu: 5.74%\x1b[39m")
    assert _steps("torchtitan", [line, "step: 10  loss: 7.1  (no tps on this line)"]) == [
        parsers.Record(throughput=12345.0, step=10)]
    spec = build_spec("titan", command=["t"], parser="torchtitan")
    assert (spec.unit, spec.scope) == ("tokens/s", "rank")  # tps is each GPU's tokens per second


def test_megatron_reads_the_iteration_time_and_its_global_batch():
    line = (" [2026-11-27 08:00:00] iteration       10/    1000 | consumed samples:         2560 | elapsed time per "
            "iteration (ms): 512.5 | throughput per GPU (TFLOP/s/GPU): 201.5 | learning rate: 1.000000E-04 | global "
            "batch size:   256 | lm loss: 7.123E+00 | loss scale: 1.0 | number of skipped iterations:   0 |")
    assert _steps("megatron", [line]) == [parsers.Record(step_time=0.5125, step=10, samples=256)]
    assert _steps("megatron", [line], seq_length=2048)[0].samples == 256 * 2048
    assert build_spec("m", command=["t"], parser="megatron").unit == "seq/s"
    assert build_spec("m", command=["t"], parser="megatron", seq_length=2048).unit == "tokens/s"
    with pytest.raises(ValueError, match=r"^command 'm': seq_length must be a positive integer"):
        build_spec("m", command=["t"], parser="megatron", seq_length="2k")


def test_timm_reads_the_updates_rate_and_numbers_its_steps_across_epochs():
    lines = ["Train: 0 [   0/1251 (  0%)]  Loss: 6.95 (6.95)  Time: 2.104s,  121.67/s  (2.104s,  121.67/s)  "
             "LR: 1.000e-05  Data: 1.500 (1.500)",
             "Train: 1 [  50/1251 (  4%)]  Loss: 6.91 (6.93)  Time: 0.358s,  714.98/s  (0.360s,  711.11/s)  "
             "LR: 1.000e-05  Data: 0.012 (0.015)",
             "Test: [   0/49]  Time: 0.900 (0.900)  Loss:  6.8 (6.8)  Acc@1:   0.1 (  0.1)"]
    assert _steps("timm", lines) == [parsers.Record(throughput=121.67, step=0),
                                     parsers.Record(throughput=714.98, step=1251 + 50)]


def test_fairseq_reads_wps_in_its_simple_and_json_forms_not_the_epoch_summary():
    simple = ("2026-11-27 08:00:00 | INFO | train_inner | epoch 001:    100 / 1000 loss=7.29, nll_loss=6.1, ppl=68.6, "
              "wps=26843.2, ups=7.01, wpb=3829.4, bsz=128, num_updates=100, lr=0.0001, gnorm=1.2, wall=15")
    json_form = '{"epoch": 1, "update": 0.101, "loss": "7.28", "wps": "26900.5", "ups": "7.02", "num_updates": "101"}'
    summary = "epoch 001 | loss 7.1 | wps 26000 | ups 7 | num_updates 1000"
    assert _steps("fairseq", [simple, json_form, summary]) == [parsers.Record(throughput=26843.2, step=100),
                                                              parsers.Record(throughput=26900.5, step=101)]
    assert build_spec("f", command=["t"], parser="fairseq").unit == "tokens/s"


def test_wlm_reads_ms_per_batch():
    lines = ["| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.00 | loss  7.63 | ppl  2064.23",
             "| end of epoch   1 | time: 140.10s | valid loss  5.80 | valid ppl   330.30",
             "| epoch   2 |     1/ 2983 batches | lr 20.00 | ms/batch 44.50 | loss  5.51 | ppl   247.15"]
    assert _steps("wlm", lines) == [parsers.Record(step_time=0.045, step=200),
                                    parsers.Record(step_time=0.0445, step=2983 + 1)]
    assert build_spec("w", command=["t"], parser="wlm").unit == "seq/s"


def test_tqdm_reads_a_real_bar_one_step_per_iteration_redrawn_or_not():
    tqdm = pytest.importorskip("tqdm")
    drawn = io.StringIO()
    for _ in tqdm.tqdm(range(7), file=drawn, mininterval=0):
        pass
    for _ in tqdm.tqdm(range(3), file=drawn, mininterval=0, desc="again"):  # a second bar: its count starts over
        pass
    text = drawn.getvalue()
    assert "\r" in text and "it/s]" in text
    # As the log is read (universal newlines): a redraw is a line.
    steps = _steps("tqdm", io.StringIO(text, newline=None).read().splitlines())
    assert [r.step for r in steps] == [*range(1, 8), *range(1, 4)]
    assert all(r.step_time and r.step_time > 0 for r in steps)
    # A bar that skipped redraws (tqdm's mininterval): each iteration since its last line is a step of its rate;
    # s/it for slow ones, a scaled rate for fast ones.
    lines = [" 0%|          | 0/100 [00:00<?, ?it/s]", " 2%|▏         | 2/100 [00:01<01:00,  2.00it/s]",
             " 2%|▏         | 2/100 [00:01<01:00,  2.00it/s]", " 5%|▌         | 5/100 [00:07<03:10,  2.50s/it]",
             " 6%|▌         | 6/100 [00:07<00:00,  1.25kit/s]"]
    assert [(r.step, r.step_time) for r in _steps("tqdm", lines)] == [
        (1, 0.5), (2, 0.5), (3, 2.5), (4, 2.5), (5, 2.5), (6, pytest.approx(0.0008))]


def test_lightning_steps_from_its_epochs_average_rate():
    # Lightning's bar has smoothing=0: its rate is the epoch's count over its elapsed seconds, 2 decimals.
    seconds = [0.05, 0.05, 0.2, 0.05, 0.05, 0.05]
    lines, elapsed = [], 0.0
    for n, step in enumerate(seconds, start=1):
        elapsed += step
        bar = f"Epoch 0:  {n}%|▏   | {n}/100 [00:00<00:10, {n / elapsed:.2f}it/s, v_num=0, train_loss=2.3]"
        lines += [bar, bar.replace("train_loss=2.3", "train_loss=2.2")]  # drawn again by set_postfix
    lines.append("Epoch 1:   1%|▏   | 1/100 [00:00<00:05, 20.00it/s, v_num=0]")  # a new epoch: its bar starts over
    steps = _steps("lightning", lines)
    assert [r.step for r in steps] == [1, 2, 3, 4, 5, 6, 1]
    assert [r.step_time for r in steps] == pytest.approx([*seconds, 0.05], rel=0.02)
    assert sum(r.step_time for r in steps[:6]) == pytest.approx(sum(seconds), rel=0.001)  # the window's seconds


# --------------------------------------------------------------------------- units of a regex step


@pytest.mark.parametrize(("options", "line", "record"), [
    ({"pattern": r"ms/batch (?P<step_time>[\d.]+)", "step_time_unit": "ms"}, "ms/batch 45.00",
     parsers.Record(step_time=0.045)),
    ({"pattern": r"ms/batch (?P<step_time_ms>[\d.]+)"}, "ms/batch 45.00", parsers.Record(step_time=0.045)),
    ({"pattern": r"(?P<it_per_s>[\d.]+)it/s"}, "4.00it/s", parsers.Record(step_time=0.25)),
    ({"pattern": r"(?P<s_per_it>[\d.]+)s/it"}, "2.50s/it", parsers.Record(step_time=2.5)),
    ({"pattern": r"rate (?P<throughput>[\d.]+)", "throughput_unit": "it/s"}, "rate 4.0",
     parsers.Record(step_time=0.25)),
    ({"pattern": r"rate (?P<throughput>[\d.]+)", "throughput_unit": "s/it"}, "rate 4.0", parsers.Record(step_time=4.0)),
    ({"pattern": r"tokens/sec (?P<throughput>[\d,.]+)", "throughput_unit": "tokens/s"}, "tokens/sec 12,345.5",
     parsers.Record(throughput=12345.5)),
])
def test_a_regex_step_in_its_own_unit(options, line, record):
    assert parsers.make("regex", options).parse_line(line) == [record]


def test_steps_of_it_per_s_count_samples_per_step_samples():
    records = parsers.make("regex", {"pattern": r"(?P<it_per_s>[\d.]+)it/s"}).parse(["4.00it/s"] * 3)[0]
    assert windows_of(records, warmup=1, steps=2, repeats=1, samples_per_step=8)[0]["throughput"] == 32.0


@pytest.mark.parametrize(("fields", "message"), [
    ({"pattern": r"(?P<step_time>[\d.]+)", "step_time_unit": "sec"},
     "command 'x': step_time_unit must be one of s, ms, not 'sec'"),
    ({"pattern": r"(?P<throughput>[\d.]+)", "throughput_unit": "wps"},
     "command 'x': throughput_unit must be one of it/s, s/it, img/s, seq/s, tokens/s, samples/s"),
    ({"pattern": r"(?P<throughput>[\d.]+)", "throughput_unit": "tokens/s", "unit": "img/s"},
     "command 'x': unit 'img/s', but parser 'regex' reads figures in tokens/s: give unit 'tokens/s'"),
    ({"parser": "torchtitan", "unit": "samples/s"},
     "command 'x': unit 'samples/s', but parser 'torchtitan' reads figures in tokens/s"),
    ({"pattern": r"(?P<step_time>[\d.]+)", "stop_once_measured": "no"},
     "command 'x': stop_once_measured must be true or false, not 'no'"),
])
def test_a_unit_mistake_is_one_line(fields, message):
    with pytest.raises(ValueError) as raised:
        build_spec("x", command=["t.py"], **fields)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_a_unit_given_in_the_pattern_becomes_the_cases():
    spec = build_spec("x", command=["t.py"], pattern=r"tps (?P<throughput>\d+)", throughput_unit="tokens/s")
    assert spec.unit == "tokens/s" and spec.stop_once_measured


# --------------------------------------------------------------------------- register_parser's forms


@pytest.fixture
def restored_parsers():
    saved = parsers.PARSERS.snapshot()
    yield
    parsers.PARSERS.restore(saved)


def test_register_parser_takes_the_name_first_or_from_the_class(restored_parsers):
    @parsers.register_parser("pytorch-wlm-test")
    class Named(parsers.Parser):
        def parse_line(self, line):
            return []

    @parsers.register_parser
    class Own(parsers.Parser):
        name = "own-name-test"

        def parse_line(self, line):
            return []

    assert parsers.PARSERS["pytorch-wlm-test"] is Named and Named.name == "pytorch-wlm-test"
    assert parsers.PARSERS["own-name-test"] is Own
    assert build_spec("x", command=["t"], parser="pytorch-wlm-test").parser == "pytorch-wlm-test"


def _refused(register) -> str:
    with pytest.raises(ValueError) as raised:
        register()
    return str(raised.value)


def test_the_wrong_form_is_one_line_naming_the_file_and_what_to_write(restored_parsers):
    class Nameless(parsers.Parser):
        pass

    here = str(Path(__file__).resolve())
    write = "write @register_parser('my-parser') above a class deriving from pytest_dlperf.commands.Parser"
    for message in (_refused(lambda: parsers.register_parser(Nameless)),
                    _refused(lambda: parsers.register_parser(len)),
                    _refused(lambda: parsers.register_parser("")),
                    _refused(lambda: parsers.register_parser("x-test")(len))):
        assert "\n" not in message and message.startswith(here + ": "), message
        assert write.replace("my-parser", "x-test") in message or write in message, message
    taken = _refused(lambda: parsers.register_parser("regex")(Nameless))
    assert taken == f"{here}: parser name 'regex' is empty or taken"


# --------------------------------------------------------------------------- the docs' registrations, as written


def _blocks(path: Path, heading: str | None = None) -> list[str]:
    text = path.read_text()
    if heading is not None:
        text = text[text.index(heading):]
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_gallerys_commands_register_and_each_line_is_read_by_its_parser(monkeypatch):
    import pytest_dlperf

    registered = {}

    def register_command(name, command, **fields):
        registered[name] = build_spec(name, command=command, source=str(GALLERY), **fields)

    monkeypatch.setattr(pytest_dlperf, "register_command", register_command)
    code = _blocks(GALLERY)[0]  # the gallery's block; the framework scripts' follow it
    exec(compile(code, str(GALLERY), "exec"), {})
    assert {spec.parser for spec in registered.values()} == {"torchtitan", "megatron", "timm", "tqdm", "lightning",
                                                            "fairseq", "wlm"}
    rows = re.findall(r"^\| `([a-z]+)` \| `(.*?)` \|", GALLERY.read_text(), flags=re.M)
    assert {name for name, _ in rows} == {spec.parser for spec in registered.values()}
    for name, line in rows:
        steps = _steps(name, [line.replace("\\|", "|")])
        assert steps and (steps[0].throughput or steps[0].step_time), (name, line)
    # Each command logs every step: its flag is in its command line (the table's last column).
    for spec in registered.values():
        flags = re.search(rf"^\| `{spec.parser}` \|.*\| ([^|]*) \|$", GALLERY.read_text(), flags=re.M).group(1)
        named = [word for flag in re.findall(r"`([^`]+)`", flags) for word in flag.split() if word.startswith("--")]
        assert all(word in spec.command for word in named), (spec.name, named)


def test_the_three_registrations_side_by_side_run_as_written(restored_parsers):
    code = _blocks(ROOT / "docs" / "commands.md", "The three registrations read alike")[0]
    saved = models.snapshot()
    try:
        namespace = {"__file__": str(ROOT / "docs" / "commands.md")}
        exec(compile(code, "docs/commands.md", "exec"), namespace)
        assert models.get_model_spec("my-script").parser == "my-log"
        assert models.get_model_spec("my-mlp").task == "regression"
        assert parsers.make("my-log", {}).parse_line("step 7 took 0.25") == [parsers.Record(step_time=0.25)]
    finally:
        models.restore(saved)


# --------------------------------------------------------------------------- following a log: measured, \r


def test_a_run_is_measured_once_every_ranks_log_has_its_steps(tmp_path):
    logs = [tmp_path / "rank0.log", tmp_path / "rank1.log"]
    bar = "".join(f"\r{n}/100 [00:01<00:10,  4.00it/s]" for n in range(1, 6))  # a bar: no newline at all
    logs[0].write_text(bar)
    logs[1].write_text("\r1/100 [00:01<00:10,  4.00it/s]\r2/100 [00:01<00:10,  4.00it/s]\r")
    watch = follow.LogFollower(lambda: logs, lambda: parsers.make("tqdm", {}), expected_steps=4, startup=60.0)
    watch.poll()
    # rank 0's last redraw is still being written (no line end after it): 4 steps; rank 1: 2.
    assert watch.steps == 4 and not watch.measured([[logs[0]], [logs[1]]])
    assert watch.measured([[logs[0]]])
    with open(logs[1], "a") as out:
        out.write("3/100 [00:01<00:10,  4.00it/s]\r4/100 [00:01<00:10,  4.00it/s]\r")
    watch.poll()
    assert watch.measured([[logs[0]], [logs[1]]])
    timed = follow.LogFollower(lambda: logs, lambda: parsers.make("tqdm", {}), expected_steps=None, startup=60.0)
    timed.poll()
    assert not timed.measured([[logs[0]]])  # a time to train needs the whole run


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
