"""A CPU guard for the host work of the built-in GPU recipes: the aten operators one training step of
bert-base and resnet50 (amp, as the seeds run them) dispatches, and the values it reads back to the host
(:mod:`pytest_dlperf.worker.hostwork`).

On an H200, bert-base amp bs64 waits on the host (54% mean GPU utilization): a change to its recipe that
adds operators, or a read-back, makes it slower there, and the GPU only sees it nights later. This test
sees it on any CPU. The counts do not depend on the tensors' sizes nor on the CPU, so the models run at
full depth (bert-base's 12 layers, resnet50's 53 convolutions) but a small width and input.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from pytest_dlperf.cases import Case
from pytest_dlperf.models import get_model_spec
from pytest_dlperf.worker.hostwork import HostWork, count_step, gpu_recipe_optimizer
from pytest_dlperf.worker.training import TrainingStep

pytest.importorskip("transformers")

#: A rise above the recorded operators by more than this fails (one more operator in each of bert-base's
#: layers, forward and backward, is +24 of 2,940; one more in each resnet50 block is +32 of 858); a fall by
#: more than FEWER fails too, so that the record follows a deliberate saving and keeps guarding it.
MORE = 0.005
FEWER = 0.05


@dataclass(frozen=True)
class Recorded:
    ops: int
    syncs: int
    settings: tuple[tuple[str, int], ...]  # the small width and input that the count does not depend on


#: Measured with torch 2.14.1 and transformers 5.23.0 (2026-11-27), on an AMD EPYC; an upgrade of either
#: may move them. A deliberate change of a recipe (or an upgrade) that moves them: run
#: ``python -m pytest tests/test_host_work.py``, read the new counts in the failure, measure the change on a
#: GPU (benchmarks/gpu_diagnose.py or benchmarks/bert_recipes.py: its GPU utilization and throughput) and
#: write the counts here with that measurement in the commit message.
HOST_WORK = {
    "bert-base": Recorded(ops=2940, syncs=0, settings=(("hidden_size", 48), ("intermediate_size", 64),
                                                       ("seq_len", 16), ("vocab_size", 512))),
    # SGD is not fused, so GradScaler.step reads found_inf back before it: one sync a step, on a GPU too.
    "resnet50": Recorded(ops=858, syncs=1, settings=(("image_size", 32),)),
}


def host_work(model: str, settings: dict) -> HostWork:
    """One step's host work of ``model`` amp at batch 2 with the GPU's optimizer, counted on the CPU."""
    spec = get_model_spec(model)
    case = Case.make(model, "amp", 2, settings=settings)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the count does not depend on threads; the time on a shared 2-core VM does
    try:
        step = TrainingStep(spec, case, spec.settings(settings), torch.device("cpu"))
        step.optimizer = gpu_recipe_optimizer(spec.optimizer, step.model.parameters())
        return count_step(step)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("model", sorted(HOST_WORK))
def test_a_built_in_step_asks_no_more_of_the_host_than_recorded(model):
    recorded = HOST_WORK[model]
    work = host_work(model, dict(recorded.settings))
    where = (f"{model} amp: one step dispatched {work.ops} aten operators and read {work.syncs} value(s) back "
             f"to the host; recorded {recorded.ops} and {recorded.syncs} (HOST_WORK in tests/test_host_work.py: "
             f"its comment says how to update it deliberately). Most frequent: {work.top()}")
    assert work.syncs <= recorded.syncs, where
    assert work.ops <= recorded.ops * (1 + MORE), where
    assert work.ops >= recorded.ops * (1 - FEWER), where


def test_the_count_sees_an_added_operator_and_a_read_back():
    """The guard can fail: a step with one more operator per layer, and one that reads its loss back."""
    model = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(3)))
    batch = torch.randn(2, 4)

    def step(extra: bool = False, read: bool = False):
        x = batch
        for layer in model:
            x = layer(x)
            if extra:
                x = x * 1.0
        loss = x.square().mean()
        loss.backward()
        if read:
            loss.item()

    plain = count_step(step)
    more = count_step(lambda: step(extra=True))
    read = count_step(lambda: step(read=True))
    assert (plain.syncs, read.syncs) == (0, 1)
    assert more.ops >= plain.ops + 2 * len(model)  # forward and backward of each added multiply
    assert read.ops == plain.ops + 1
    assert more.by_op["aten.mul"] - plain.by_op.get("aten.mul", 0) >= len(model)
