"""Each precision's training step on CUDA: autocast dtype, GradScaler, TF32 flags, memory layout.

The case trains ``stepprobe``, a small convnet registered in the inner session's conftest
(so its workers import it too).  On its first CUDA forward it records what the step is
doing: autocast and its dtype, the dtype the convolution computed in, the TF32 and cuDNN
flags, and whether the input and the weights are channels_last.  A hook on the logits'
gradient then recovers the loss scale: for mean cross-entropy, the gradient of a logit
that is not the label is ``scale * softmax / batch``.

Expected (README, "Precisions"): fp32 with TF32 off; tf32 with it on; amp in float16 with a
GradScaler whose initial scale is 128, channels_last; bf16 in bfloat16, no scaler,
channels_last.  cudnn.benchmark is on in every case.
"""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from .support import GPU_TEST, first_run, only_case

pytestmark = GPU_TEST

STEP_PROBE = textwrap.dedent("""
    import json, os
    import torch
    from torch import nn
    from pytest_dlperf import register_model

    OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.jsonl")
    SEEN = []

    def layout(tensor):
        return "nhwc" if tensor.is_contiguous(memory_format=torch.channels_last) else "nchw"

    def autocast_dtype():
        if not torch.is_autocast_enabled("cuda"):
            return None
        return str(torch.get_autocast_dtype("cuda"))

    class StepProbe(nn.Module):
        def __init__(self, classes):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.fc = nn.Linear(16, classes)

        def forward(self, x):
            hidden = self.conv(x)
            logits = self.fc(torch.relu(hidden).mean((2, 3)))
            if x.is_cuda and not SEEN:
                SEEN.append(True)
                record = {
                    "device": str(x.device),
                    "autocast": autocast_dtype(),
                    "conv_dtype": str(hidden.dtype),
                    "logits_dtype": str(logits.dtype),
                    "input_layout": layout(x),
                    "weight_layout": layout(self.conv.weight),
                    "matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                    "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
                    "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                }
                probs = torch.softmax(logits.detach().float(), dim=1)

                def on_grad(grad):
                    grad = grad.float()
                    positive = grad > 0  # the logits that are not the label
                    scales = grad[positive] * grad.shape[0] / probs[positive]
                    record["loss_scale"] = float(scales.median())
                    with open(OUT, "a") as handle:
                        handle.write(json.dumps(record) + "\\n")

                logits.register_hook(on_grad)
            return logits

    @register_model("stepprobe", task="image-classification", batch_size=32,
                    defaults={"image_size": 32, "num_classes": 10})
    def stepprobe(settings):
        return StepProbe(int(settings["num_classes"]))
""")

EXPECTED = {
    "fp32": {"autocast": None, "compute": "torch.float32", "layout": "nchw", "tf32": False, "scale": 1.0},
    "tf32": {"autocast": None, "compute": "torch.float32", "layout": "nchw", "tf32": True, "scale": 1.0},
    "amp": {"autocast": "torch.float16", "compute": "torch.float16", "layout": "nhwc", "tf32": False,
            "scale": 128.0},
    "bf16": {"autocast": "torch.bfloat16", "compute": "torch.bfloat16", "layout": "nhwc", "tf32": False,
             "scale": 1.0},
}


@pytest.mark.parametrize("precision", list(EXPECTED))
def test_the_training_step_of_each_precision(gpu, precision):
    expected = EXPECTED[precision]
    gpu.conftest(STEP_PROBE)
    result = gpu.run("--dlperf-model", "stepprobe", "--dlperf-precision", precision, "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    record = only_case(gpu.results())
    run = first_run(record)
    assert run["device"]["type"] == "cuda" and run["device"]["index"] == 0
    assert run["settings"]["channels_last"] is (expected["layout"] == "nhwc")
    assert run["final_loss"] is not None and math.isfinite(run["final_loss"]), run["warnings"]

    lines = (gpu.path / "steps.jsonl").read_text().splitlines()
    assert len(lines) == 1, lines  # one worker, one first step
    step = json.loads(lines[0])
    assert step["device"] == "cuda:0"
    assert step["autocast"] == expected["autocast"]
    assert step["conv_dtype"] == expected["compute"] and step["logits_dtype"] == expected["compute"]
    assert (step["input_layout"], step["weight_layout"]) == (expected["layout"], expected["layout"])
    assert (step["matmul_tf32"], step["cudnn_tf32"]) == (expected["tf32"], expected["tf32"])
    assert step["cudnn_benchmark"] is True
    # amp: the loss was scaled by the GradScaler's initial 128 before backward; no scaler otherwise.
    assert step["loss_scale"] == pytest.approx(expected["scale"], rel=0.02)
