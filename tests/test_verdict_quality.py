"""benchmarks/verdict_quality.py: its slowed model does the work it says, and the script runs end to end.

The figures are the script's own output (benchmarks/README.md); these tests only check that a
model given with ``--model`` is slowed by training more samples than its batch, and that the
script runs, keeps to ``--budget`` and prints its table.
"""

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from pytest_dlperf.models import registry

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "verdict_quality.py"


def load_conftest(monkeypatch, **env):
    """The conftest the script writes, executed with ``env``; the models it registers are dropped afterwards."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    namespace = {"__name__": "vq_conftest", "__file__": str(SCRIPT)}
    source = SCRIPT.read_text()
    start = source.index("CONFTEST = '''") + len("CONFTEST = '''")
    exec(compile(source[start:source.index("'''", start)], str(SCRIPT), "exec"), namespace)
    return namespace


@pytest.fixture
def saved_registry():
    saved = registry.snapshot()
    yield
    registry.restore(saved)


def test_a_model_given_with_model_trains_its_pad_more_samples_and_returns_the_batch(monkeypatch, saved_registry):
    load_conftest(monkeypatch, DLPERF_VQ_MODEL="tiny", DLPERF_VQ_PAD="3")
    spec = registry.get_model_spec("vq-tiny")
    assert spec.task == registry.get_model_spec("tiny").task and spec.unit == "img/s"
    model = registry.create_model("vq-tiny")
    seen = []
    model.model.register_forward_hook(lambda module, args, out: seen.append(args[0].shape[0]))
    batch = spec.make_batch(8, spec.settings(), torch.device("cpu"))
    out = model(batch[0])
    assert seen == [11] and out.shape[0] == 8  # the inner model saw 8 + 3 samples; the loss sees 8
    out.sum().backward()  # the padded samples are part of the graph: their backward is done too
    monkeypatch.setenv("DLPERF_VQ_PAD", "0")
    seen.clear()
    assert registry.create_model("vq-tiny")(batch[0]).shape[0] == 8 and seen == []  # its own hook list is empty


def test_without_model_only_vq_is_registered(monkeypatch, saved_registry):
    monkeypatch.delenv("DLPERF_VQ_MODEL", raising=False)
    load_conftest(monkeypatch, DLPERF_VQ_COST="3")
    assert registry.create_model("vq", {"num_classes": 10}).cost == 3
    assert not [name for name in registry.list_models() if name.startswith("vq-")]


def test_the_script_runs_a_model_and_prints_the_table_of_the_sessions_it_had_time_for(tmp_path):
    # One baseline session of tiny (one run), and the stale one beside the neighbour, then the budget is spent: the
    # table shows no session, exit 0.  Busy runs count (--max-interference off): the test's neighbours (the suite's
    # other xdist worker) would otherwise leave the baseline without a quiet run, and unsaved.  The neighbour copies
    # memory 5% of the time, not the default half: the same path, without a process that burns half a CPU for the
    # whole stale session (about 3 s of CPU taken from the suite's other workers).
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--model", "tiny", "--batch-size", "8", "--slowdown", "0.2",
                           "--steps", "0,2,1", "--baseline-runs", "1", "--sessions", "1", "--stale-sessions", "1",
                           "--stale-duty", "0.05", "--budget", "0", "--max-interference", "off"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "cost: unchanged 8 samples a step, slowed 10 (20.0% less throughput" in out
    assert "--budget 0 s spent: the sessions done so far" in out
    assert re.search(r"^stale baseline \(beside a neighbour copying memory 0.05 of the time\): [\d.]+ img/s "
                     r"\([\d.]+ of the first\) from \d+ runs \(\d+ busy\), .*; the save said: ", out, re.MULTILINE), out
    assert "tolerance | kind" in out and out.rstrip().splitlines()[-1].startswith("total ")


def test_the_saved_tolerance_is_the_entry_s_else_the_file_s_default_else_the_plugin_s():
    spec = importlib.util.spec_from_file_location("verdict_quality", SCRIPT)
    vq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vq)
    entry = {"model": "vq", "precision": "fp32", "batch_size": 8, "gpus": 1, "throughput": 100.0}
    assert vq.saved_tolerance_of({"defaults": {"tolerance": 0.03}, "cases": [entry]}) == 0.03  # a save's --dlperf-tolerance
    assert vq.saved_tolerance_of({"defaults": {"tolerance": 0.03}, "cases": [{**entry, "tolerance": 0.07}]}) == 0.07
    assert vq.saved_tolerance_of({"cases": [entry]}) == vq.DEFAULT_TOLERANCE


def test_the_tenant_kinds_run_beside_the_copying_process_under_the_plugin_s_own_rules():
    spec = importlib.util.spec_from_file_location("verdict_quality", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    opts = types.SimpleNamespace(hog=False, neighbour_sessions=2, tenant_sessions=2, gpu_busy_sessions=0,
                                 neighbour_duty=0.25, helper_sessions=0)
    cost, slowed = {"DLPERF_VQ_PAD": "0"}, [("slowed30", {"DLPERF_VQ_PAD": "14"})]
    kinds = {name: (c, beside) for name, c, beside in script.session_kinds(opts, cost, slowed)}
    assert list(kinds) == ["unchanged", "slowed30", "neighbour", "tenant", "tenant+slowed30"]
    neighbour = script.NEIGHBOUR.format(duty=0.25)
    assert kinds["tenant"] == (cost, [neighbour]) and kinds["tenant+slowed30"] == (slowed[0][1], [neighbour])
    assert kinds["neighbour"] == (cost, [neighbour]) and kinds["unchanged"] == (cost, [])
    # The neighbour kind counts every run (no process list shows another VM's tenant); the tenant kinds are judged
    # as a user's sessions are, the host's own slowdown included.
    assert script.RULES_OFF == {"neighbour"}
    opts.tenant_sessions = 0
    assert "tenant" not in {name for name, _, _ in script.session_kinds(opts, cost, slowed)}
    # The helpers kind: the unchanged case, whose model starts a spinning helper per CPU, nothing beside it.
    opts.helper_sessions = 2
    helpers = {name: (c, beside) for name, c, beside in script.session_kinds(opts, cost, slowed)}["helpers"]
    assert helpers == ({**cost, "DLPERF_VQ_HELPERS": str(os.cpu_count() or 1)}, [])
