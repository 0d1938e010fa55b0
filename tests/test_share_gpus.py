"""``--dlperf-share-gpus``: a case's ranks on the visible GPUs modulo their count, over gloo (the whole multi-rank
path on the one GPU of a test machine: tests/gpu/test_cuda_shared_gpu.py runs it there). Here, on the CPU: the
mapping, the backend and its refusal with NCCL, the run parameters that carry it to the workers, and what the
results say of a shared case's scaling figures."""

from __future__ import annotations

import jsonschema
import pytest

from pytest_dlperf import jsonio
from pytest_dlperf.cases import Case
from pytest_dlperf.controller.device import DeviceChoice
from pytest_dlperf.gate.verdict import scaling, scaling_message
from pytest_dlperf.launch.workers import RunParams
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.protocol import WorkerSpec
from pytest_dlperf.reporting.summary import scaling_cell
from pytest_dlperf.worker.distributed import choose_backend, shared_index


def test_ranks_map_onto_the_visible_gpus_modulo_their_count():
    assert [shared_index(rank, 1) for rank in range(4)] == [0, 0, 0, 0]
    assert [shared_index(rank, 2) for rank in range(5)] == [0, 1, 0, 1, 0]
    assert [shared_index(rank, 8) for rank in range(8)] == list(range(8))  # enough GPUs: a GPU each, as ever
    with pytest.raises(ValueError, match="no GPU is visible"):
        shared_index(0, 0)


def test_shared_ranks_meet_over_gloo_and_nccl_is_refused_in_one_line():
    assert choose_backend("cuda") == "nccl" and choose_backend("cpu") == "gloo"
    assert choose_backend("cuda", "gloo") == "gloo"
    assert choose_backend("cuda", "auto", shared=True) == choose_backend("cuda", "gloo", shared=True) == "gloo"
    with pytest.raises(ValueError) as refused:
        choose_backend("cuda", "nccl", shared=True)
    assert str(refused.value) == ("--dlperf-share-gpus: ranks that share a GPU meet over gloo; NCCL refuses two "
                                  "ranks on one device; expected dlperf_dist_backend gloo or auto")


def test_the_options_refuse_nccl_for_shared_gpus_before_any_case_runs(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-share-gpus", "-o", "dlperf_dist_backend=nccl")
    assert result.ret == 4
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR")]
    assert errors == ["ERROR: --dlperf-share-gpus: ranks that share a GPU meet over gloo; NCCL refuses two ranks "
                      "on one device; expected dlperf_dist_backend gloo or auto"], result.stderr.str()
    result = dlperf.run("--dlperf-model", "tiny", "-o", "dlperf_dist_backend=mpi")
    assert result.ret == 4 and "dlperf_dist_backend: 'mpi'" in result.stderr.str()


def test_the_setting_reaches_every_worker_s_spec():
    params = RunParams(device="cuda", share_gpus=True, dist_backend="gloo")
    spec = WorkerSpec.from_params(Case.make("tiny", "amp", 32, gpus=2), get_model_spec("tiny"), params)
    assert (spec.share_gpus, spec.dist_backend) == (True, "gloo")
    assert RunParams(device="cuda").to_dict()["share_gpus"] is False  # the results' parameters say it either way


def test_a_case_shares_gpus_only_where_it_has_more_ranks_than_gpus():
    one_gpu, two_gpus = DeviceChoice("cuda", 1), DeviceChoice("cuda", 2)
    assert one_gpu.shared(2, True) == 1 and two_gpus.shared(4, True) == 2
    assert two_gpus.shared(2, True) is None  # a GPU per rank: nothing shared, the figures measure scaling
    assert one_gpu.shared(2, False) is None and DeviceChoice("cpu", 0).shared(2, True) is None


def test_a_shared_case_s_scaling_figures_say_they_measure_nothing_and_are_not_gated():
    shared = scaling(900.0, 2, 1000.0, "this session", 0.8, "plain process", shared_gpus=1)
    assert shared.efficiency == pytest.approx(0.45) and not shared.failed
    assert scaling_message("tiny-amp-bs32-gpu2", shared, "img/s").endswith(
        ": measures no scaling, the 2 ranks shared 1 GPU(s) over gloo (--dlperf-share-gpus); not gated")
    assert scaling_cell(shared) == "0.90x (45%) shared GPU"
    apart = scaling(900.0, 2, 1000.0, "this session", 0.8, "plain process")
    assert apart.failed and scaling_cell(apart) == "0.90x (45%) FAIL"
    field = jsonio.schema("results")["$defs"]["case"]["properties"]["scaling"]
    for figures in (shared, apart):
        jsonschema.validate(figures.to_dict(), field)
    assert field["properties"]["shared_gpus"]["description"].startswith("--dlperf-share-gpus")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**shared.to_dict(), "shared_gpus": 0}, field)
