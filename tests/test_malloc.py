"""``dlperf_malloc``: the workers' allocator settings reach every rank, and only under ``steady``.

The workers read them from ``GLIBC_TUNABLES`` (:func:`pytest_dlperf.launch.launchers.malloc_env`);
a model of our own, registered from a conftest, records what its worker process was given.
"""

import dataclasses
from pathlib import Path

import pytest

from pytest_dlperf.launch.launchers import STEADY_MALLOC, get_launcher, malloc_env

STEADY = ":".join(f"{name}={value}" for name, value in STEADY_MALLOC.items())

CONFTEST = '''
import os
from pathlib import Path
from torch import nn
from pytest_dlperf import register_model


@register_model("seen", task="image-classification", batch_size=4, defaults={"image_size": 8, "num_classes": 2})
def seen(settings):
    ranks, rank = os.environ.get("WORLD_SIZE", "1"), os.environ.get("RANK", "0")
    Path(f"tunables-{ranks}-{rank}.txt").write_text(os.environ.get("GLIBC_TUNABLES", "<unset>"))
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 2))
'''


def test_steady_adds_glibc_tunables_and_keeps_the_environments_own():
    assert malloc_env("steady", {}) == {"GLIBC_TUNABLES": STEADY}
    kept = malloc_env("steady", {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=5:glibc.cpu.hwcaps=-AVX2"})
    assert kept == {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=5:glibc.cpu.hwcaps=-AVX2:"
                                      f"glibc.malloc.trim_threshold={STEADY_MALLOC['glibc.malloc.trim_threshold']}"}
    assert malloc_env("steady", {"GLIBC_TUNABLES": STEADY}) == {}
    assert malloc_env("system", {}) == {}


def test_mpirun_is_told_to_pass_the_variable_on(tmp_path: Path):
    launcher = get_launcher("mpi")
    plan = launcher.with_env(launcher.plan(2, "cpu", tmp_path), {"GLIBC_TUNABLES": STEADY})
    assert plan.command[:5] == ["mpirun", "-x", "GLIBC_TUNABLES", "-np", "2"]
    assert plan.command.count("GLIBC_TUNABLES") == 1 and plan.env["GLIBC_TUNABLES"] == STEADY
    # Whatever the plan's shape (options before -np, from a subclass or --dlperf-launcher-args): its
    # arguments stay in order and in pairs.
    odd = dataclasses.replace(plan, command=["mpirun", "--bind-to", "none", "-np", "2", "prog"])
    assert launcher.with_env(odd, {"X": "1"}).command == ["mpirun", "-x", "X", "--bind-to", "none", "-np", "2",
                                                          "prog"]
    # A plan's own variables win over the added ones.
    assert launcher.with_env(plan, {"MASTER_ADDR": "elsewhere"}).env["MASTER_ADDR"] == plan.env["MASTER_ADDR"]
    local = get_launcher("local")
    assert local.with_env(local.plan(1, "cpu", tmp_path), {"GLIBC_TUNABLES": STEADY}).env == {"GLIBC_TUNABLES": STEADY}


@pytest.mark.parametrize(("args", "expected"), [
    ((), STEADY),
    (("-o", "dlperf_malloc=system"), "<unset>"),
])
def test_each_rank_gets_the_allocator_settings(dlperf, monkeypatch, args, expected):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    dlperf.pytester.makeconftest(CONFTEST)
    result = dlperf.run("--dlperf-model", "seen", "--dlperf-gpus", "1,2", *args)
    result.assert_outcomes(passed=2)
    # A file per process, named by its case's ranks and its rank: all three processes were given it.
    assert {p.name: p.read_text() for p in dlperf.path.glob("tunables-*.txt")} == {
        "tunables-1-0.txt": expected, "tunables-2-0.txt": expected, "tunables-2-1.txt": expected}
