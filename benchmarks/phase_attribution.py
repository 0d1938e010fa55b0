"""Does a FAIL name the phase a slowdown was put in?  Issue 49's claim, measured on the path a user takes.

One baseline of a small MLP of this script's own (``phasenet``, registered from a temporary ``conftest.py``) is
saved with the plugin, then sessions gate against it, alternating kinds:

* ``unchanged``: the model as saved; its messages must name no phase (a "where the time went" line comes only
  with a FAIL or an IMPROVED);
* ``data``, ``forward``, ``backward``, ``optimizer``: the model slowed in that one place (a dataset that sleeps
  before it hands over each batch, a forward hook, a backward hook, torch's optimizer step hook, each sleeping):
  its FAIL must name that phase.  (The model trains on a synthetic batch, so the sleeping dataset is the worker's
  ``TrainingStep.next_batch`` made to wait, where a loader that cannot keep up shows);
* ``far``: the forward slowed ten steps' worth, so that its runs are cut short far off the baseline (they write no
  windows): its FAIL must name ``forward``, from the steps the runs timed before their cut;
* ``comm`` (``--ranks 2``): two gloo ranks, the second waiting ``--delay`` in its backward, so the first waits for
  the all-reduce: the first rank's exposed communication grows, and the FAIL must name ``comm``;
* ``allreduce`` (``--ranks 2``): the all-reduce itself made slower on both ranks: DDP's all-reduce (the one the
  worker's communication hook calls) completes ``--delay`` later, after the backward, with no computation to hide
  it: the FAIL must name ``comm``.  (A larger all-reduce, a zero gradient of as many floats as the model's own, was
  named ``optimizer`` 3 of 3: the optimizer's step over the extra floats grew more than the all-reduce.)

The delay is a sleep, a share of the step chosen by ``--slowdown`` (the unchanged step time, from the baseline's
phases, times it), so each kind is about that much slower.  It prints, per kind: sessions, failed, whose FAIL
names the phase put in, names another, names none; and the unchanged sessions' lines that name a phase.  Exit 0.

    python benchmarks/phase_attribution.py --sessions 10 --slowdown 0.3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFTEST = '''
import os
import time

from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from pytest_dlperf import register_model

WHERE = os.environ.get("SLOW_PHASE")
DELAY = float(os.environ.get("SLOW_SECONDS", "0"))
RANK = int(os.environ.get("RANK", "0"))


def nap(*args):
    time.sleep(DELAY)


if WHERE == "data":  # a dataset that sleeps: each batch is handed over DELAY late
    from pytest_dlperf.worker.training import TrainingStep

    _next_batch = TrainingStep.next_batch

    def _slower_batch(self):
        time.sleep(DELAY)
        return _next_batch(self)

    TrainingStep.next_batch = _slower_batch


if WHERE == "optimizer":  # every optimizer's step waits first (torch's global step hook)
    register_optimizer_step_pre_hook(nap)


if WHERE == "allreduce":  # every rank's all-reduce completes DELAY later, on the collective's own thread
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    _allreduce = default_hooks.allreduce_hook

    def _slower_allreduce(process_group, bucket):
        return _allreduce(process_group, bucket).then(lambda done: (time.sleep(DELAY), done.value())[1])

    default_hooks.allreduce_hook = _slower_allreduce


@register_model("phasenet", task="regression", batch_size=64, defaults={"in_features": 64, "out_features": 4})
def phasenet(settings):
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 4))
    if WHERE == "forward":
        model[0].register_forward_hook(nap)
    elif WHERE == "backward" or (WHERE == "comm" and RANK == 1):
        model[2].register_full_backward_hook(nap)
    return model
'''
PHASE_LINE = re.compile(r"where the time went: (outside the timed phases|\S+)")
KINDS = ("unchanged", "data", "forward", "backward", "optimizer", "far")
#: Where each kind puts its slowdown, as a FAIL's line names the phase, where not the kind's own name.
PUT = {"allreduce": "comm", "far": "forward"}
#: The ``far`` kind's slowdown, in steps: far beyond half the threshold, so that its runs are cut short.
FAR_STEPS = 10
COMMON = ["--dlperf-device", "cpu", "--dlperf-model", "phasenet", "-p", "no:cacheprovider", "-p", "no:benchmark"]


def session(folder: Path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "pytest", *COMMON, *args], cwd=folder, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=1800)
    return done.returncode, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10, help="sessions of each kind (default 10)")
    parser.add_argument("--slowdown", type=float, default=0.3, help="added time as a share of a step (0.3)")
    parser.add_argument("--ranks", type=int, default=1, help="2: the comm and allreduce kinds too, on two gloo ranks")
    parser.add_argument("--kinds", default=None, help="the kinds to run, comma-separated (default: all)")
    parser.add_argument("--show", action="store_true", help="print each session's FAIL message")
    parser.add_argument("--busy-off", action="store_true",
                        help="-o dlperf_max_interference=off in every session: a smoke run on a loaded machine")
    opts = parser.parse_args(argv)
    if opts.busy_off:
        COMMON.extend(["-o", "dlperf_max_interference=off"])
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "conftest.py").write_text(CONFTEST)
        gpus = ["--dlperf-gpus", str(opts.ranks)]
        code, out = session(folder, [*gpus, "--dlperf-save-baseline", "base.json"], {})
        if code != 0:
            print(out[-3000:])
            return 1
        (entry,) = json.loads((folder / "base.json").read_text())["cases"]
        step = entry["phases"]["step"]
        delay = opts.slowdown * step
        print(f"baseline {entry['throughput']:,.1f} {entry['unit']}, a step {step * 1e3:.2f} ms: "
              f"phases {', '.join(f'{k} {v * 1e3:.2f}' for k, v in entry['phases'].items())} ms; "
              f"delay {delay * 1e3:.2f} ms a step")
        kinds = [*KINDS, *(["comm", "allreduce"] if opts.ranks > 1 else [])]
        kinds = [kind for kind in kinds if opts.kinds is None or kind in opts.kinds.split(",")]
        table = {kind: {"sessions": 0, "failed": 0, "right": 0, "other": 0, "none": 0, "named": 0} for kind in kinds}
        for _ in range(opts.sessions):
            for kind in kinds:
                put = PUT.get(kind, kind)  # where the slowdown is put, as the line names it
                env = {} if kind == "unchanged" else {"SLOW_PHASE": "forward" if kind == "far" else kind,
                                                      "SLOW_SECONDS": str(FAR_STEPS * step if kind == "far" else delay)}
                code, out = session(folder, [*gpus, "--dlperf-baseline", "base.json"], env)
                named = PHASE_LINE.findall(out)
                row = table[kind]
                row["sessions"] += 1
                row["failed"] += code == 1
                row["named"] += bool(named)
                if code == 1:
                    row["right" if named and named[0] == put else "other" if named else "none"] += 1
                cut = ", runs cut short far off" if "cut short" in out else ""
                print(f"  {kind}: exit {code}, named {named or '-'}{cut}", flush=True)
                if code == 1 and not named or opts.show:  # what the FAIL said instead
                    lines = out.splitlines()
                    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("FAIL ")), None)
                    print("\n".join("    " + line for line in lines[start:start + 6]) if start is not None
                          else out[-1500:], flush=True)
    print(f"\n{'kind':10} sessions failed names-it names-other names-none lines-naming-a-phase")
    for kind, row in table.items():
        print(f"{kind:10} {row['sessions']:8} {row['failed']:6} {row['right']:8} {row['other']:12} "
              f"{row['none']:10} {row['named']:8}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
