"""Named parsers for the step lines of the trainers teams run (docs/trainers.md).

Each reads its trainer's own published log line, one logged step (or one logging interval) per line;
the formats are the projects' (their source, cited per parser), the code is ours:

``torchtitan``
    ``step: 10  loss:  7.1234  memory: 31.42GiB(39.67%)  tps: 1,234  tflops: 56.78  mfu: 5.74%``
    (https://github.com/pytorch/torchtitan, ``torchtitan/components/metrics.py``; ANSI colours read
    past).  ``tps`` is tokens per second *of each GPU* over the logging interval: unit ``tokens/s``,
    scope ``rank``.  No phases: its data-loading time (``time_metrics/data_loading(s)``, ``(%)``) goes to
    TensorBoard or W&B only, not to this line (``MetricsProcessor.log``, same file).
``megatron``
    Megatron-LM's ``training_log`` (https://github.com/NVIDIA/Megatron-LM, ``megatron/training/training.py``;
    Megatron-Bridge, NeMo's Megatron backend, prints the same): `` iteration       10/    1000 | consumed samples: ... |
    elapsed time per iteration (ms): 512.3 | throughput per GPU (TFLOP/s/GPU): ... | ... | global batch
    size:   256 | ...``: a step of ``elapsed time per iteration`` (the interval's mean) and of the global
    batch it logs (sequences; ``seq_length`` given: tokens).
``timm``
    timm's ``train.py`` (https://github.com/huggingface/pytorch-image-models): ``Train: 0 [  50/1251 (  4%)]
    Loss: 6.91 (6.93)  Time: 0.358s,  714.98/s  (0.360s,  711.11/s)  LR: ...``: the last update's rate,
    samples of every rank per second (``img/s``).
``tqdm``
    A tqdm progress bar, as a ``transformers`` ``Trainer`` draws it on stderr (https://github.com/tqdm/tqdm):
    `` 5%|▌         | 50/1000 [00:10<03:10,  4.98it/s]`` or ``2.03s/it``: each iteration since the bar's last
    line is a step of its rate (tqdm's smoothed rate).
``lightning``
    PyTorch Lightning's ``TQDMProgressBar`` (https://github.com/Lightning-AI/pytorch-lightning,
    ``callbacks/progress/tqdm_progress.py``): ``Epoch 0:  45%|████▌     | 450/1000 [00:12<00:15, 36.42it/s,
    v_num=0, train_loss=0.123]``.  Its bar has ``smoothing=0``: the rate is the epoch's iterations over its
    elapsed time, so a step's seconds are the difference of ``n / rate`` between two lines.
``fairseq``
    fairseq's ``train_inner`` lines, ``--log-format simple`` (``... | epoch 001:    100 / 1000 loss=7.29,
    ..., wps=26843.2, ups=7.01, ..., num_updates=100, ...``) or ``json`` (``{"epoch": 1, ..., "wps": "26843.2",
    ..., "num_updates": "100", ...}``) (https://github.com/facebookresearch/fairseq,
    ``fairseq/logging/progress_bar.py``): ``wps``, target tokens per second of the job over the interval.
``wlm``
    PyTorch's ``examples/word_language_model/main.py`` (https://github.com/pytorch/examples):
    ``| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.00 | loss  7.63 | ppl  2064.23``: a step of
    ``ms/batch`` (the interval's mean), of ``samples_per_step`` sequences (default: the batch).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from .formats import number
from .parsers import Mark, Parser, Record, register_parser

#: ANSI colour codes (torchtitan colours its line unless --metrics.disable_color_printing).
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _LineParser(Parser):
    """One regular expression per trainer; :meth:`record` turns its match into the step."""

    LINE: ClassVar[re.Pattern[str]]
    FORMAT: ClassVar[str] = ""  # the line, in words, for the message where a log has none

    def parse_line(self, line: str) -> list[Record | Mark]:
        match = self.LINE.search(ANSI.sub("", line))
        found = self.record(match) if match else None
        return [found] if found is not None else []

    def record(self, match: re.Match[str]) -> Record | None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} step lines ({self.FORMAT})"


def _across_epochs(match: re.Match[str], first_epoch: int) -> int:
    """The step's number counted over epochs: groups ``epoch`` (the first is ``first_epoch``), ``index`` in it
    and ``total`` steps an epoch."""
    return (int(match["epoch"]) - first_epoch) * int(match["total"]) + int(match["index"])


class _RateParser(_LineParser):
    """A line that states the throughput (group ``rate``, in ``UNIT``) of its step (group ``step``)."""

    UNIT: ClassVar[str]

    @classmethod
    def logged_unit(cls, options: Mapping[str, Any]) -> str | None:
        return cls.UNIT

    def record(self, match: re.Match[str]) -> Record | None:
        rate = number(match["rate"])
        return Record(throughput=rate, step=self.step(match)) if rate else None

    def step(self, match: re.Match[str]) -> int:
        return int(match["step"])


@register_parser("torchtitan")
class TorchTitanParser(_RateParser):
    LINE = re.compile(r"\bstep:\s*(?P<step>\d+)\s.*?\btps:\s*(?P<rate>[\d,]+(?:\.\d+)?)")
    FORMAT = "'step: 10  loss: ...  tps: 1,234  ...'"
    UNIT = "tokens/s"
    default_scope = "rank"


@register_parser("megatron")
class MegatronParser(_LineParser):
    options: ClassVar[Mapping[str, Any]] = {"seq_length": None}
    LINE = re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*"
                      r"(?P<ms>[\d.]+)(?:.*?global batch size:\s*(?P<batch>\d+))?")
    FORMAT = "'iteration 10/1000 | ... | elapsed time per iteration (ms): 512.3 | ... | global batch size: 256 |'"
    default_unit = "seq/s"

    @classmethod
    def check(cls, who: str, options: Mapping[str, Any]) -> dict[str, Any]:
        checked = super().check(who, options)
        length = checked.get("seq_length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
            raise ValueError(f"{who}: seq_length must be a positive integer (tokens per sequence), not {length!r}")
        return checked

    @classmethod
    def logged_unit(cls, options: Mapping[str, Any]) -> str | None:
        return "tokens/s" if options.get("seq_length") else "seq/s"

    def record(self, match: re.Match[str]) -> Record | None:
        ms = number(match["ms"])
        if not ms:
            return None
        batch = int(match["batch"]) if match["batch"] else None
        samples = batch * self.settings["seq_length"] if batch and self.settings["seq_length"] else batch
        return Record(step_time=ms / 1000.0, step=int(match["step"]), samples=samples)


@register_parser("timm")
class TimmParser(_RateParser):
    LINE = re.compile(r"Train:\s*(?P<epoch>\d+)\s*\[\s*(?P<index>\d+)\s*/\s*(?P<total>\d+).*?Time:\s*[\d.]+s,\s*"
                      r"(?P<rate>[\d.]+)/s")
    FORMAT = "'Train: 0 [  50/1251 (  4%)]  Loss: ...  Time: 0.358s,  714.98/s ...'"
    UNIT = "img/s"

    def step(self, match: re.Match[str]) -> int:
        return _across_epochs(match, first_epoch=0)


class _BarParser(_LineParser):
    """A tqdm bar, drawn again and again with ``\\r``: a step per iteration since its last line (a bar whose
    count goes back is a new bar); :meth:`seconds` says each one's seconds from the line."""

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.bar: tuple[str | None, int, float] | None = None  # (the bar's key, its count, its seconds so far)

    def parse_line(self, line: str) -> list[Record | Mark]:
        match = self.LINE.search(ANSI.sub("", line))
        if match is None:
            return []
        key, count = match.groupdict().get("epoch"), int(match["n"])
        start = self.bar if self.bar is not None and self.bar[0] == key and self.bar[1] <= count else (key, 0, 0.0)
        before, elapsed_before = start[1], start[2]
        per_step, elapsed = self.seconds(match, count, before, elapsed_before) if count > before else (None, 0.0)
        if per_step is None:  # drawn again with no new iteration (or no rate yet)
            self.bar = start
            return []
        self.bar = (key, count, elapsed)
        return [Record(step_time=per_step, step=step) for step in range(before + 1, count + 1)]

    def seconds(self, match: re.Match[str], count: int, before: int,
                elapsed_before: float) -> tuple[float | None, float]:
        """(each new iteration's seconds, the bar's seconds so far) from the line; None: it says no rate."""
        raise NotImplementedError


#: A tqdm bar's count and rate: ``50/1000 [00:10<03:10,  4.98it/s]``, ``2.03s/it``, ``1.21kit/s`` (unit_scale).
_BAR = (r"(?P<n>\d+)/(?P<total>\d+|\?)\s*\[[\d:]+(?:<[\d:?]+)?,\s*(?:(?P<inverse>[\d.]+)s/[A-Za-z]+|"
        r"(?P<rate>[\d.]+)(?P<scale>[kMG]?)[A-Za-z]+/s)")
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _per_step(match: re.Match[str]) -> float | None:
    """Seconds per iteration at a bar's rate (``4.98it/s``, ``1.2kit/s``, ``2.03s/it``); None for none."""
    if match["inverse"]:
        return number(match["inverse"])
    rate = number(match["rate"])
    return 1.0 / (rate * _SCALE[match["scale"] or ""]) if rate else None


@register_parser("tqdm")
class TqdmParser(_BarParser):
    LINE = re.compile(_BAR)
    FORMAT = "a progress bar ' 5%|▌    | 50/1000 [00:10<03:10,  4.98it/s]'"

    def seconds(self, match: re.Match[str], count: int, before: int,
                elapsed_before: float) -> tuple[float | None, float]:
        return _per_step(match), 0.0


@register_parser("lightning")
class LightningParser(_BarParser):
    LINE = re.compile(r"Epoch (?P<epoch>\d+):.*?" + _BAR)
    FORMAT = "'Epoch 0:  45%|████▌     | 450/1000 [00:12<00:15, 36.42it/s, v_num=0]'"

    def seconds(self, match: re.Match[str], count: int, before: int,
                elapsed_before: float) -> tuple[float | None, float]:
        per_step = _per_step(match)
        if per_step is None:
            return None, elapsed_before
        elapsed = count * per_step  # the epoch's seconds so far: its rate is its count over them (smoothing=0)
        return max(elapsed - elapsed_before, 0.0) / (count - before) or None, elapsed


@register_parser("fairseq")
class FairseqParser(_RateParser):
    LINE = re.compile(r"""(?:\bwps=|"wps":\s*"?)(?P<rate>[\d.]+).*?"""
                      r"""(?:\bnum_updates=|"num_updates":\s*"?)(?P<step>\d+)""")
    FORMAT = "'epoch 001:    100 / 1000 loss=..., wps=26843.2, ..., num_updates=100' or its JSON form"
    UNIT = "tokens/s"


@register_parser("wlm")
class WordLanguageModelParser(_LineParser):
    LINE = re.compile(r"\|\s*epoch\s+(?P<epoch>\d+)\s*\|\s*(?P<index>\d+)\s*/\s*(?P<total>\d+) batches\s*\|.*?"
                      r"ms/batch\s+(?P<ms>[\d.]+)")
    FORMAT = "'| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.00 | loss  7.63 | ppl  2064.23'"
    default_unit = "seq/s"

    def record(self, match: re.Match[str]) -> Record | None:
        ms = number(match["ms"])
        return Record(step_time=ms / 1000.0, step=_across_epochs(match, first_epoch=1)) if ms else None
