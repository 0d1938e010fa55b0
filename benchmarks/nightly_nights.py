"""A nightly of three nights through the SLURM recipe, gated with ``--dlperf-against last-good`` (issue 53).

What it measures: whether the recipe of docs/nightly.md works unattended from its first night.  A temporary git
repository holds a model of the tests' own (``abnet`` of tests/test_ab.py: ``--layers`` layers of 256 units in its
``conftest.py``) and a baseline saved there with the plugin (``--dlperf-save-baseline``, committed, as
docs/nightly.md's step 2).  Then three nights, each a commit submitted as written with
examples/ci/slurm/dlperf-nightly.sbatch (``sbatch --wait`` to the private one-node SLURM cluster of
tests/cluster.py, the CPU and short windows as the script's own pytest arguments, as tests/test_nightly_examples.py
submits it):

1. the first night: no night has passed yet, so it is judged against the baseline (expected: PASS, exit 0);
2. an unchanged commit: pairs against night 1's commit (expected: PASS, exit 0);
3. a commit whose model has ``--slower-layers`` layers (15 against 10: about 30% fewer samples a second on a
   2-core VM; 13 gave 22%): pairs against night 2's commit (expected: FAIL, exit 1).

It prints each night's commit, its reference (the header's ``dlperf: last-good:`` line), the case's verdict and
message, the job's exit status and its seconds.  Exit status 0 when the three nights end as expected, else 1.
``--bash`` runs the batch script with bash instead of sbatch: the same pytest command line, without SLURM.
The history is the script's default (SQLite copied to and from ``$HOME/dlperf/history.db``; ``HOME`` a
temporary folder).

    python benchmarks/nightly_nights.py                   # through SLURM (root, SLURM and munge installed)
    python benchmarks/nightly_nights.py --bash --keep     # without SLURM; keep the repository to look at
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_ab import MODEL  # noqa: E402
from tests.test_nightly_examples import NO_CI_COMMIT  # noqa: E402

SBATCH = ROOT / "examples" / "ci" / "slurm" / "dlperf-nightly.sbatch"
BASELINE = "baselines/my-gpu.json"
#: What the batch script's environment holds: this interpreter's venv, one thread a worker, no CI job's commit
#: (GITHUB_SHA and the like would name another commit than the repository's HEAD).
ENV = {"DLPERF_VENV": sys.prefix, "OMP_NUM_THREADS": "1", "PYTEST_XDIST_WORKER": "",
       "PYTEST_XDIST_WORKER_COUNT": "", "PYTEST_XDIST_TESTRUNUID": "",
       **NO_CI_COMMIT}


@dataclasses.dataclass
class Night:
    """One night's outcome, as the job left it."""

    name: str
    commit: str
    reference: str
    verdict: str
    message: str
    status: int
    seconds: float


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=n@n", "-c", "user.name=nightly", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def night_args(opts: argparse.Namespace) -> list[str]:
    """The pytest arguments after the script's name: the CPU, the windows, the budget."""
    warmup, steps, repeats = opts.steps.split(",")
    return ["--dlperf-device", "cpu", "--dlperf-warmup-steps", warmup, "--dlperf-steps", steps,
            "-o", f"dlperf_repeats={repeats}", "-o", f"dlperf_max_interference={opts.max_interference}",
            "--dlperf-max-runs", str(opts.max_runs)]


def make_repository(repo: Path, home: Path, opts: argparse.Namespace) -> None:
    """The model committed, a baseline saved with it on this machine and committed (docs/nightly.md, step 2)."""
    repo.mkdir()
    (repo / "conftest.py").write_text(MODEL.format(layers=opts.layers))
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / ".gitignore").write_text("nights/\ndlperf-nightly-*.out\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", f"abnet, {opts.layers} layers")
    save = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "dlperf", "--dlperf-model", "abnet",
            "--dlperf-save-baseline", BASELINE, *night_args(opts)[:-2]]
    done = subprocess.run(save, cwd=repo, env={**os.environ, **ENV, "HOME": str(home)}, capture_output=True,
                          text=True, timeout=opts.timeout)
    if done.returncode != 0:
        sys.exit(f"saving the baseline failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    document = json.loads((repo / BASELINE).read_text())
    saved = document["cases"][0]
    tolerance = saved.get("tolerance", document.get("defaults", {}).get("tolerance"))
    print(f"baseline: {saved['throughput']:,.1f} {saved['unit']}, tolerance {tolerance}", flush=True)
    git(repo, "add", BASELINE)
    git(repo, "commit", "-q", "-m", "dlperf: this machine's baseline")


class Submitter:
    """The batch script submitted as written, through a private SLURM cluster or (``--bash``) bash."""

    def __init__(self, opts: argparse.Namespace, home: Path):
        self.opts, self.home, self.cluster = opts, home, None
        if not opts.bash:
            from tests.cluster import SlurmCluster

            self.cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))).start()

    def night(self, repo: Path) -> tuple[int, str, Path]:
        """Run one night from ``repo``: its exit status, its log and its outputs folder."""
        env = {**ENV, "HOME": str(self.home)}
        before = set((repo / "nights").glob("*")) if (repo / "nights").exists() else set()
        if self.cluster is None:
            done = subprocess.run(["bash", str(SBATCH), *night_args(self.opts)], cwd=repo, capture_output=True,
                                  text=True, env={**os.environ, **env}, timeout=self.opts.timeout)
            log = done.stdout + done.stderr
        else:
            done = self.cluster.run(["sbatch", "--wait", f"--chdir={repo}", f"--partition={self.cluster.partition}",
                                     "--gpus-per-node=0", str(SBATCH), *night_args(self.opts)],
                                    env=env, timeout=self.opts.timeout, check=False)
            job = re.search(r"Submitted batch job (\d+)", done.stdout)
            out = repo / f"dlperf-nightly-{job.group(1)}.out" if job else None
            log = out.read_text(errors="replace") if out and out.exists() else done.stdout + done.stderr
        made = sorted(set((repo / "nights").glob("*")) - before) or sorted((repo / "nights").glob("*"))
        return done.returncode, log, made[-1] if made else repo / "nights" / "none"

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop(check=False)
            shutil.rmtree(self.cluster.root, ignore_errors=True)


def read_night(name: str, commit: str, status: int, log: str, folder: Path, seconds: float) -> Night:
    """What the night's log and results say: its reference (the header's last-good line) and the case's verdict."""
    chosen = re.search(r"^dlperf: last-good: (.*)$", log, flags=re.M)
    reference = chosen.group(1) if chosen else "(no last-good line)"
    path = folder / "results.json"
    cases = json.loads(path.read_text())["cases"] if path.exists() else []
    verdict = ",".join(str(c.get("verdict")) for c in cases) or "none"
    message = " | ".join(c.get("message", "") for c in cases) or log[-1500:]
    return Night(name, commit[:7], reference, verdict, message, status, seconds)


def run_nights(repo: Path, submitter: Submitter, opts: argparse.Namespace) -> list[Night]:
    """The three nights, each a commit of its own."""
    changes = [("1: the first night", None), ("2: unchanged", "--allow-empty"),
               ("3: slower", opts.slower_layers)]
    nights = []
    for name, change in changes:
        if change == "--allow-empty":
            git(repo, "commit", "-q", "--allow-empty", "-m", "an unchanged night")
        elif change is not None:
            (repo / "conftest.py").write_text(MODEL.format(layers=change))
            git(repo, "commit", "-q", "-am", f"abnet, {change} layers")
        commit = git(repo, "rev-parse", "HEAD")
        start = time.monotonic()
        status, log, folder = submitter.night(repo)
        night = read_night(name, commit, status, log, folder, time.monotonic() - start)
        print(f"night {name}: {night.commit} -> {night.verdict}, exit {night.status} ({night.seconds:.0f} s)\n"
              f"  reference: {night.reference}\n  {night.message}", flush=True)
        nights.append(night)
    return nights


def table(nights: list[Night]) -> str:
    """The nights in one table: the reference in short, the estimate as the verdict's line gives it."""
    rows = ["| night | commit | judged against | verdict | estimate | exit | seconds |",
            "|---|---|---|---|---|---|---|"]
    for n in nights:
        judged = "the baseline (no night passed yet)" if "judged against" in n.reference else \
            f"pairs with {n.reference.split(',')[0]}"
        found = re.search(r"gpu\d+: (.*?) \((?:tolerance|98% CI)", n.message)
        rows.append(f"| {n.name} | {n.commit} | {judged} | {n.verdict.upper()} | {found.group(1) if found else '?'} "
                    f"| {n.status} | {n.seconds:.0f} |")
    return "\n".join(rows)


def expected(nights: list[Night]) -> bool:
    """Night 1 against the baseline and passed; nights 2 and 3 in pairs against the night before; 0, 0, 1."""
    if len(nights) != 3:
        return False
    first, second, third = nights
    return ("this night is judged against" in first.reference and first.verdict in ("pass", "improved")
            and second.reference.startswith(first.commit) and second.verdict == "pass"
            and third.reference.startswith(second.commit) and third.verdict == "fail"
            and [n.status for n in nights] == [0, 0, 1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bash", action="store_true", help="run the batch script with bash, not through SLURM")
    parser.add_argument("--layers", type=int, default=10, help="abnet's layers on nights 1 and 2 (default 10)")
    parser.add_argument("--slower-layers", type=int, default=15, help="abnet's layers on night 3 (default 15)")
    parser.add_argument("--steps", default="10,50,3", help="WARMUP,STEPS,REPEATS of every run (default 10,50,3)")
    parser.add_argument("--max-runs", type=int, default=10, help="runs or pairs a case at most (default 10)")
    parser.add_argument("--max-interference", default="off", help="dlperf_max_interference (default off: "
                        "the tests' setting, for a shared host)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a night at most (default 1200)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary repository and print its path")
    opts = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="dlperf-nights-"))
    repo, home = work / "repo", work / "home"
    home.mkdir()
    started = time.monotonic()
    make_repository(repo, home, opts)
    submitter = Submitter(opts, home)
    try:
        nights = run_nights(repo, submitter, opts)
    finally:
        submitter.stop()
        if opts.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{table(nights)}\n\n{time.monotonic() - started:.0f} s in all; "
          f"{'as expected' if expected(nights) else 'NOT as expected'}")
    return 0 if expected(nights) else 1


if __name__ == "__main__":
    sys.exit(main())
