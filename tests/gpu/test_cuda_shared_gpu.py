"""The multi-rank path on one GPU: ``--dlperf-share-gpus`` runs a gpu2 case's two ranks on the one GPU of a lease.

No machine with two GPUs has been lent, so without this a ``gpu2`` case never ran on CUDA. The two ranks share
GPU 0 (rank r on GPU r mod 1) and meet over gloo (NCCL refuses two ranks on one device): DDP all-reduces CUDA
tensors, each rank samples its GPU's telemetry and writes its own log, and the scaling figures are computed
against the gpu1 case, and marked as measuring nothing (``scaling.shared_gpus``), not gated.
"""

from __future__ import annotations

from .support import GPU_TEST, files_under, first_run, first_visible_nvml_device

pytestmark = GPU_TEST

CASE = ("--dlperf-model", "resnet18", "--dlperf-precision", "amp", "--dlperf-batch-size", "64",
        "--dlperf-warmup-steps", "5", "--dlperf-steps", "10", "-o", "dlperf_repeats=3")


def test_two_ranks_share_one_gpu_over_gloo_end_to_end(gpu, monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "INFO")  # an NCCL group would say so in the ranks' logs: none must
    logs = gpu.path / "logs"
    result = gpu.run(*CASE, "--dlperf-gpus", "1,2", "--dlperf-share-gpus", "-o", "dlperf_min_efficiency=0.99",
                     "--dlperf-json", "results.json", "--dlperf-log-dir", str(logs))
    result.assert_outcomes(passed=2)  # an efficiency far below 0.99 does not fail: it is not gated
    one, two = sorted(gpu.results()["cases"], key=lambda record: record["case"]["gpus"])
    assert one["scaling"] is None and two["parameters"]["share_gpus"] is True
    ranks = first_run(two)["ranks"]
    expected = first_visible_nvml_device()
    assert [r["rank"] for r in ranks] == [0, 1] and {r["device"] for r in ranks} == {expected["name"]}, ranks
    # Each rank's telemetry: the same GPU, busy while both trained.
    per_rank = {entry["rank"]: entry for entry in two["telemetry"]}
    assert sorted(per_rank) == [0, 1]
    keys = {rank: list(entry["gpu"]["devices"]) for rank, entry in per_rank.items()}
    assert keys[0] == keys[1] and len(keys[0]) == 1, keys
    for entry in per_rank.values():
        summary = next(iter(entry["gpu"]["devices"].values()))
        assert summary["name"] == expected["name"] and summary["utilization_gpu"]["mean"] > 20, summary
    # Each rank's own log, and no NCCL in any.
    rank_logs = [p for p in files_under(logs, "*.log") if "ranks" in p.parts]
    assert len({p.parent for p in rank_logs}) >= 2, files_under(logs)
    assert not [p for p in rank_logs if "NCCL INFO" in p.read_text(errors="replace")]
    # The scaling figures are there, said to measure nothing.
    scaling = two["scaling"]
    assert scaling["shared_gpus"] == 1 and scaling["ranks"] == 2 and scaling["speedup"] > 0, scaling
    assert scaling["reference_source"] == "this session"
    assert "measures no scaling, the 2 ranks shared 1 GPU(s) over gloo (--dlperf-share-gpus)" in two["message"]
    assert two["verdict"] != "fail"
