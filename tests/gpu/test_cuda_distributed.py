"""torchrun and NCCL on CUDA: a 1-rank job measures what the single process does; 2 ranks scale.

A 1-rank ``--dlperf-launcher torchrun`` case starts its worker under ``torch.distributed.run``,
joins an NCCL process group and trains through ``DistributedDataParallel``: the whole
multi-GPU path on one GPU.  With one rank, DDP has nothing to exchange, so its throughput
must be within 2% of the plain single-process case (``--dlperf-launcher local``).
"""

from __future__ import annotations

from .support import GPU_TEST, files_under, first_run, only_case, requires_gpus

pytestmark = GPU_TEST

# ResNet-50 AMP bs256, the seeds' case: one run of 5 windows of 20 steps (about 2 s each on
# an H100) on each side; the median window of each is compared.
CASE = ("--dlperf-model", "resnet50", "--dlperf-precision", "amp", "--dlperf-batch-size", "256",
        "--dlperf-warmup-steps", "20", "--dlperf-steps", "20", "--dlperf-repeats", "5")


def test_a_one_rank_torchrun_nccl_job_is_within_two_percent_of_one_process(gpu, monkeypatch):
    plain = gpu.run(*CASE, "--dlperf-json", "plain.json")
    plain.assert_outcomes(passed=1)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")  # NCCL says it started, in the rank's own log
    logs = gpu.path / "torchrun-logs"
    ddp = gpu.run(*CASE, "--dlperf-launcher", "torchrun", "--dlperf-json", "torchrun.json", "--dlperf-log-dir",
                  str(logs))
    ddp.assert_outcomes(passed=1)
    one, job = only_case(gpu.results("plain.json")), only_case(gpu.results("torchrun.json"))
    assert first_run(one)["ranks"] == []  # a plain worker
    ranks = first_run(job)["ranks"]
    assert [r["rank"] for r in ranks] == [0] and ranks[0]["device"] == first_run(one)["device"]["name"]
    nccl = [p for p in files_under(logs, "*.log") if "NCCL INFO" in p.read_text(errors="replace")]
    assert nccl, f"no NCCL INFO line in the logs under {logs}"
    ratio = job["throughput"] / one["throughput"]
    assert abs(ratio - 1) <= 0.02, (f"torchrun/plain = {ratio:.4f}: {job['throughput']:.1f} vs "
                                    f"{one['throughput']:.1f} {one['unit']}")


@requires_gpus(2)
def test_two_ranks_on_two_gpus_scale(gpu):
    result = gpu.run(*CASE, "--dlperf-gpus", "1,2", "--dlperf-min-efficiency", "0.8", "--dlperf-json",
                     "results.json")
    result.assert_outcomes(passed=2)
    _one, two = gpu.results()["cases"]
    assert two["scaling"]["reference_source"] == "this session"
    assert two["scaling"]["efficiency"] >= 0.8, two["scaling"]
    devices = {r["device"] for r in first_run(two)["ranks"]}
    assert len(first_run(two)["ranks"]) == 2 and None not in devices
