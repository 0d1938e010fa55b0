"""Every baseline shipped under baselines/ is valid and its cases are collectable."""

import json
from pathlib import Path

import pytest

from pytest_dlperf import baseline, data, jsonio, models

SHIPPED = Path(__file__).parent.parent / "baselines"
BASELINES = sorted(SHIPPED.rglob("*.json"))  # baselines/cpu-smoke/ is a folder: one file per machine class
IDS = [p.relative_to(SHIPPED).as_posix() for p in BASELINES]


@pytest.mark.parametrize("path", BASELINES, ids=IDS)
def test_a_shipped_baseline_is_valid_and_names_its_sources(path):
    document = json.loads(path.read_text())
    jsonio.validate(document, "baseline", path)
    loaded = baseline.load(path)
    assert loaded.entries, "a baseline without cases"
    for entry in loaded.entries:
        spec = models.get_model_spec(entry.case.model)  # a registered model
        if entry.case.converges:  # judged by its time to target (seconds), not a throughput
            assert entry.budget and (entry.time_to_target is None or entry.time_to_target > 0)
        else:
            assert entry.unit == spec.unit
        assert entry.source, f"{entry.case.id}: every entry says where its figure comes from"
        if entry.case.gpus > 1 and entry.min_scaling_efficiency is not None:
            one = loaded.reference(entry.case)
            assert one is not None, f"{entry.case.id}: a scaling gate needs the 1-GPU entry"
            # The published figures themselves pass their own gate.
            assert entry.throughput / one.throughput / entry.case.gpus >= entry.min_scaling_efficiency


@pytest.mark.parametrize("path", BASELINES, ids=IDS)
def test_a_shipped_baseline_collects(dlperf, path, tmp_path):
    # Cases with a real data backend need a data folder (the main job makes one with `dlperf dataset`).
    # Convergence cases, one with train/ and val/ splits (`dlperf dataset --learnable`).
    data.write_image_folder(tmp_path / "images", classes=2, per_class=1)
    for split in ("train", "val"):
        data.write_image_folder(tmp_path / "learnable" / split, classes=2, per_class=1)
    result = dlperf.run("--collect-only", "-q", "--strict-markers", "--dlperf-baseline", str(path),
                        "--dlperf-data-dir", str(tmp_path / "images"),
                        "--dlperf-convergence-data", str(tmp_path / "learnable"), fast=False)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    ids = [line for line in result.outlines if line.startswith("dlperf::")]
    assert len(ids) == len(baseline.load(path).entries)
