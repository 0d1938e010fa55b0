"""The controller <-> worker contract (pytest_dlperf.protocol): specs and results round-trip, nothing copied by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_dlperf import jsonio
from pytest_dlperf.cases import Case
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.protocol import ConvergenceSpec, Progress, WorkerResult, WorkerSpec, WorkerStatus, result_file, result_rank
from pytest_dlperf.launch.workers import RunParams

CASE = Case("tiny", "amp", 16, 2)


def test_every_run_field_of_the_spec_is_a_run_parameter_of_the_controller():
    params = {f.name for f in dataclasses.fields(RunParams)}
    assert set(WorkerSpec.run_fields()) <= params
    # What the controller keeps for itself (how many runs, their time limits, the launcher, whether a fork server
    # starts the worker, the pace under which it cuts a run short) is not sent; the allocator's settings and the
    # CPU's threads reach the worker in its environment (GLIBC_TUNABLES, OMP_NUM_THREADS), before it starts.
    assert params - set(WorkerSpec.run_fields()) == {"runs", "timeout", "startup_timeout", "launcher", "malloc",
                                                     "fork_server", "cpu_threads", "far"}


def test_a_spec_from_run_parameters_round_trips_through_json():
    params = RunParams(device="cpu", warmup_steps=3, steps=7, repeats=2, peak_tflops=1.5, max_memory=2 ** 30,
                       data_dir="/data", data_workers=1, telemetry=False, data_only=True, share_gpus=True,
                       dist_backend="gloo", profile=True)
    spec = WorkerSpec.from_params(CASE, get_model_spec("tiny"), params, distributed=True)
    assert (spec.device, spec.warmup_steps, spec.steps, spec.repeats, spec.max_memory) == ("cpu", 3, 7, 2, 2 ** 30)
    assert spec.model_source.module == "pytest_dlperf.models.vision" and spec.total_steps == 17
    placed = dataclasses.replace(spec.placed("/run", "/run/progress.json", launched_at=12.5), run_index=2,
                                 convergence=ConvergenceSpec("top1", 0.9))
    # Every field away from its default, so that one the worker's reading leaves out cannot pass (share_gpus and
    # dist_backend once reached no worker: on one GPU, rank 1 asked for device 1).
    defaults = {f.name: f.default for f in dataclasses.fields(WorkerSpec) if f.default is not dataclasses.MISSING}
    assert [name for name, default in defaults.items() if getattr(placed, name) == default] == []
    again = WorkerSpec.from_dict(jsonio.parse(json.dumps(placed.to_dict())))
    assert again == placed


def test_run_parameters_missing_a_spec_field_are_refused():
    class Partial:
        device = "cpu"

    with pytest.raises(TypeError, match="warmup_steps"):
        WorkerSpec.from_params(CASE, get_model_spec("tiny"), Partial())


def test_a_result_round_trips_and_unknown_fields_are_refused():
    spec = WorkerSpec.from_params(CASE, get_model_spec("tiny"), RunParams(device="cpu"))
    result = WorkerResult.started(spec, rank=0, world_size=2)
    assert result.status == WorkerStatus.ERROR and not result.ok and result.exit_code == 1
    result.status, result.final_loss = WorkerStatus.OK, None
    document = result.to_dict()
    assert "final_loss" in document and document["final_loss"] is None  # ok: always written
    assert list(document)[:3] == ["schema_version", "kind", "status"]
    assert WorkerResult.from_dict(document).to_dict() == document
    with pytest.raises(TypeError, match="'surprise'"):
        WorkerResult.from_dict(dict(document, surprise=1))


def test_file_names_and_progress():
    assert result_file(3) == "result-rank3.json" and result_rank("result-rank3.json") == 3
    assert result_rank("result-rankX.json") is None and result_rank("stderr.log") is None
    progress = Progress.now(0.25, 40)
    assert Progress.from_dict(progress.to_dict()) == progress
