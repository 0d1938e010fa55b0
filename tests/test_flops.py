"""FLOP counting (real, with FlopCounterMode), the peak table and MFU arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_dlperf.worker.flops import PEAKS, achieved_tflops, count_training_flops, device_peak, mfu, peak_tflops
from pytest_dlperf.models import get_model_spec


def _count(name: str, **kwargs):
    spec = get_model_spec(name)
    return count_training_flops(spec, spec.settings(), **kwargs)


def test_resnet50_at_224_is_about_24_3_gflop_per_image():
    count = _count("resnet50")
    assert count.device == "meta"
    assert count.per_sample == pytest.approx(24.3e9, rel=0.03)
    assert count.per_batch_at == 2
    assert count.per_batch == 2 * count.per_sample
    # Forward 2*2048*1000 per image, backward twice that (input and weight gradients).
    assert count.by_module["fc"] == 3 * 2 * 2048 * 1000
    assert sum(count.by_module.values()) == pytest.approx(count.per_sample)


def test_tiny_count_is_exact_and_linear_in_batch():
    # Forward FLOPs (2 per multiply-add) at 32x32; backward is twice that, except for the
    # first convolution, whose input needs no gradient (once).
    conv1 = 2 * 16 * 3 * 9 * 32 * 32
    conv2 = 2 * 32 * 16 * 9 * 16 * 16
    fc = 2 * 32 * 10
    at2, at4 = _count("tiny"), _count("tiny", batch_size=4)
    assert at2.per_sample == 2 * conv1 + 3 * conv2 + 3 * fc
    assert at4.per_sample == at2.per_sample
    assert at4.per_batch == 2 * at2.per_batch


def test_flops_are_per_unit_of_throughput():
    tiny = get_model_spec("tiny")
    tokens = dataclasses.replace(tiny, unit="tokens/s", items_per_sample=lambda settings: 8)
    assert count_training_flops(tokens, tokens.settings()).per_sample == _count("tiny").per_sample / 8


def test_counts_on_the_cpu_where_meta_fails():
    tiny = get_model_spec("tiny")

    def make_batch(batch_size, settings, device):
        images, labels = tiny.make_batch(batch_size, settings, device)
        return images * float(images.sum()), labels  # reading a value fails on meta

    spec = dataclasses.replace(tiny, make_batch=make_batch)
    count = count_training_flops(spec, spec.settings())
    assert count.device == "cpu"
    assert count.per_sample == _count("tiny").per_sample


def test_count_is_json_friendly():
    assert _count("tiny").to_dict() == {
        "per_sample": 8849280.0, "per_batch": 17698560.0, "per_batch_at": 2,
        "by_module": {"0": 1769472.0, "3": 7077888.0, "7": 1920.0}, "device": "meta",
    }


@pytest.mark.parametrize(("name", "precision", "expected"), [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5),
    ("NVIDIA H100 80GB HBM3", "fp32", 67),
    ("NVIDIA H100 PCIe", "amp", 756.5),
    ("NVIDIA H100 NVL", "tf32", 417.5),
    ("NVIDIA H200", "bf16", 989.5),
    ("NVIDIA H200 NVL", "amp", 835.5),
    ("NVIDIA A100-SXM4-40GB", "tf32", 156),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312),
    ("NVIDIA A100-PCIE-40GB", "fp32", 19.5),
    ("NVIDIA A100 80GB PCIe", "amp", 312),
    ("Tesla V100-SXM2-16GB", "amp", 125),
    ("Tesla V100-SXM2-32GB", "fp32", 15.7),
    ("Tesla V100-PCIE-32GB", "amp", 112),
    ("Tesla V100S-PCIE-32GB", "amp", 130),
    ("Tesla V100-SXM2-32GB", "bf16", None),
    ("Tesla V100-SXM2-32GB", "tf32", None),
    ("Tesla T4", "amp", 65),
    ("Tesla T4", "bf16", None),
    ("NVIDIA L40S", "bf16", 362.05),
    ("NVIDIA L40", "tf32", 90.5),
    ("NVIDIA L4", "amp", 121),
    ("NVIDIA A10", "bf16", 125),
    ("NVIDIA GeForce RTX 4090", "amp", 165.2),
])
def test_peak_of_real_device_names(name, precision, expected):
    assert peak_tflops(name, precision) == expected


@pytest.mark.parametrize("name", [
    "NVIDIA A10G",                               # an A10 variant with other clocks
    "NVIDIA GeForce RTX 4090 D",                 # a cut-down RTX 4090
    "NVIDIA A100-SXM4-40GB MIG 3g.20gb",         # a slice of the GPU
    "AMD Instinct MI300X",
    "Intel(R) Xeon(R) Platinum 8480+",
    None,                                        # not a GPU
])
def test_unknown_devices_have_no_peak(name):
    assert peak_tflops(name, "fp32") is None


def test_every_row_matches_its_own_example_first():
    for row in PEAKS:
        assert device_peak(row.example) is row, row.example
        tensor = [p for p in (row.tf32, row.amp, row.bf16) if p is not None]
        assert all(p >= row.fp32 for p in tensor) and row.source


def test_override_wins():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16", override=800) == 800.0
    assert peak_tflops("Intel(R) Xeon(R) Platinum 8480+", "fp32", override=2.5) == 2.5
    assert peak_tflops(None, "fp32", override=2.5) == 2.5


def test_bad_precision_or_override_is_an_error():
    with pytest.raises(ValueError, match="precision"):
        peak_tflops("NVIDIA L4", "fp16")
    with pytest.raises(ValueError, match="positive"):
        peak_tflops("NVIDIA L4", "amp", override=0)


def test_mfu_arithmetic():
    achieved = achieved_tflops(24.3e9, 3000.0)
    assert achieved == pytest.approx(72.9)
    assert mfu(achieved, 312) == pytest.approx(72.9 / 312)
    assert mfu(8 * achieved, 312, devices=8) == pytest.approx(72.9 / 312)
    assert mfu(achieved, None) is None
