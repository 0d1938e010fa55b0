"""Data backends: synthetic, torchvision and DALI, for training and data-only runs.

A session-scoped fixture writes a small JPEG dataset in the ImageFolder layout (4
classes, 160 noisy images of different sizes).  The sources are checked in-process
(shapes, normalization, the bytes of every file counted once per epoch, ranks and DALI
shards that split the files); the plugin is run with ``pytester``, whose workers train
the ``tiny`` model through each backend on the CPU, on 1 and 2 (gloo) ranks.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

from tests.fixtures import tiny_case
from pytest_dlperf import data, jsonio, models

CLASSES = 4
PER_CLASS = 40
BATCH = 16


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """DIR/class{0..3}/{0..39}.jpg: noisy RGB images of 40-96 pixels a side, so file sizes differ."""
    root = tmp_path_factory.mktemp("images")
    assert data.write_image_folder(root, CLASSES, PER_CLASS) == CLASSES * PER_CLASS
    return root


def file_sizes(root: Path) -> list[int]:
    return [p.stat().st_size for p in root.rglob("*.jpg")]


def dali_available() -> bool:
    return models.module_available("nvidia.dali")


BACKENDS = ["torchvision", pytest.param("dali", marks=pytest.mark.skipif(
    not dali_available(), reason="needs the dali extra (nvidia-dali-cuda130)"))]


# --------------------------------------------------------------------------- layout and case checks


def test_a_missing_path_a_file_and_a_flat_folder_are_not_image_folders(tmp_path):
    data.scan_image_folder.cache_clear()
    with pytest.raises(data.DataError, match=rf"--dlperf-data-dir: {tmp_path}/nope does not exist; "
                                             r"expected an ImageFolder layout: one subfolder per class"):
        data.scan_image_folder(str(tmp_path / "nope"))
    (tmp_path / "file.jpg").write_bytes(b"x")
    with pytest.raises(data.DataError, match=r"file.jpg is not a folder; expected an ImageFolder layout"):
        data.scan_image_folder(str(tmp_path / "file.jpg"))
    with pytest.raises(data.DataError, match=rf"{tmp_path} has no class subfolders; expected .*DIR/CLASS/IMAGE.jpg"):
        data.scan_image_folder(str(tmp_path))
    (tmp_path / "cats").mkdir()
    (tmp_path / "cats" / "notes.txt").write_text("no image here")
    with pytest.raises(data.DataError, match=r"class folder 'cats' has no image \(.jpg, .jpeg, .png"):
        data.scan_image_folder(str(tmp_path))


def test_the_fixture_is_an_image_folder(image_folder):
    assert data.scan_image_folder(str(image_folder)) == ("class0", "class1", "class2", "class3")


def test_case_checks_name_the_case_and_the_reason(image_folder):
    tiny = models.get_model_spec("tiny")
    settings = tiny.settings({"data": "torchvision"})
    data.check_case("tiny-x", "torchvision", tiny, settings, str(image_folder), "--dlperf-set data=torchvision")
    data.check_case("tiny-x", "synthetic", tiny, settings, None, "here")  # synthetic needs nothing
    with pytest.raises(data.DataError, match=r"^--dlperf-set data=dali: case tiny-x: data=dali reads images from "
                                             r"--dlperf-data-dir \(ini: dlperf_data_dir\), which is not set"):
        data.check_case("tiny-x", "dali", tiny, settings, None, "--dlperf-set data=dali")
    with pytest.raises(data.DataError, match=r"case tiny-x: .* has 4 classes but the model's num_classes is 3; "
                                             r"set num_classes=4"):
        data.check_case("tiny-x", "dali", tiny, dict(settings, num_classes=3), str(image_folder), "w")
    text_model = models.ModelSpec(name="texty", factory=None, make_batch=None, loss=None, unit="seq/s")
    with pytest.raises(data.DataError, match=r"^b.json: \$.cases\[0\].settings.data: case texty-x: data=torchvision "
                                             r"applies to image-classification models; model 'texty' has no task$"):
        data.check_case("texty-x", "torchvision", text_model, {}, str(image_folder), "b.json: $.cases[0].settings.data")


def test_default_workers_share_the_cpus_among_the_ranks_of_a_node():
    assert data.default_workers(1, cpus=2) == 1
    assert data.default_workers(1, cpus=16) == 8  # capped
    assert data.default_workers(8, cpus=80) == 8
    assert data.default_workers(8, cpus=48) == 5
    assert data.default_workers(4, cpus=4) == 1  # never 0: the loader always has a worker
    assert data.local_world_size({"LOCAL_WORLD_SIZE": "4"}) == 4
    assert data.local_world_size({"SLURM_NTASKS_PER_NODE": "8(x2)"}) == 8
    assert data.local_world_size({}, world_size=2) == 2


# --------------------------------------------------------------------------- the sources, in-process


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_source_reads_every_file_once_an_epoch_and_goes_on(image_folder, backend):
    source = data.make_source(backend, str(image_folder), {"image_size": 24}, BATCH, torch.device("cpu"), workers=1)
    try:
        per_epoch = CLASSES * PER_CLASS // BATCH
        labels = []
        for _ in range(per_epoch):
            images, y = source.next()
            labels.extend(y.tolist())
        assert images.shape == (BATCH, 3, 24, 24) and images.dtype == torch.float32
        assert y.dtype == torch.int64 and sorted(set(labels)) == [0, 1, 2, 3]
        assert sorted(labels) == sorted(c for c in range(CLASSES) for _ in range(PER_CLASS))
        # Normalized with ImageNet's mean and std: undone, the pixels are in [0, 1]; as given, some are negative.
        mean = torch.tensor(data.MEAN).view(1, 3, 1, 1)
        std = torch.tensor(data.STD).view(1, 3, 1, 1)
        pixels = images * std + mean
        assert float(pixels.min()) > -1e-3 and float(pixels.max()) < 1 + 1e-3 and float(images.min()) < -0.5
        assert source.bytes_read == sum(file_sizes(image_folder)) and source.samples == CLASSES * PER_CLASS
        for _ in range(2 * per_epoch + 1):  # past two more epoch ends
            source.next()
        assert source.samples == (3 * per_epoch + 1) * BATCH
    finally:
        source.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_ranks_read_disjoint_halves_of_the_files(image_folder, backend):
    """DistributedSampler / DALI's shards: in one epoch the two ranks' bytes add up to every file's, exactly
    (the fixture's file sizes range from 1.5 to 8 kB, so a rank reading a file twice would not add up), and
    each rank reads some."""
    total, seen = 0, []
    for rank in (0, 1):
        source = data.make_source(backend, str(image_folder), {"image_size": 16}, BATCH, torch.device("cpu"),
                                  rank=rank, world_size=2, workers=1)
        try:
            for _ in range(CLASSES * PER_CLASS // 2 // BATCH):
                source.next()
            seen.append(source.bytes_read)
            total += source.bytes_read
        finally:
            source.close()
    assert total == sum(file_sizes(image_folder))
    assert all(0 < half < total for half in seen)


def test_a_batch_larger_than_a_shard_is_an_error_that_says_so(image_folder):
    with pytest.raises(data.DataError, match=rf"{image_folder} has 160 images; one step of this case takes "
                                             r"batch 100 x 2 rank\(s\) = 200"):
        data.make_source("torchvision", str(image_folder), {"image_size": 16}, 100, torch.device("cpu"),
                         rank=0, world_size=2, workers=0)


def test_the_window_meter_counts_only_between_start_and_stop(image_folder):
    source = data.make_source("torchvision", str(image_folder), {"image_size": 16}, BATCH, torch.device("cpu"),
                              workers=0)
    step = data.DataOnlyStep(source, torch.device("cpu"))
    meter = data.WindowMeter(source)
    step()  # warm-up: not counted
    meter.start()
    step()
    step()
    meter.stop()
    step()  # after the windows: not counted
    counted = meter.rank_figures([{"seconds": 0.5, "throughput": 64.0}])
    assert counted["samples"] == 2 * BATCH and counted["seconds"] == 0.5
    assert min(file_sizes(image_folder)) * 2 * BATCH <= counted["bytes"] <= max(file_sizes(image_folder)) * 2 * BATCH
    assert step.batch[0].shape == (BATCH, 3, 16, 16)
    figures = data.figures(source, "data-only", [counted], [{"seconds": 0.5, "throughput": 64.0}])
    assert figures["megabytes_per_second"] == pytest.approx(counted["bytes"] / 0.5 / 1e6)
    assert figures["bytes_per_sample"] == pytest.approx(counted["bytes"] / (2 * BATCH))
    assert figures["samples_per_second"] == 64.0 and figures["workers"] == 0


# --------------------------------------------------------------------------- through the plugin


def data_args(image_folder, *args, data_dir=True):
    extra = ("--dlperf-data-dir", str(image_folder)) if data_dir else ()
    return ("--dlperf-batch-size", str(BATCH), "-o", "dlperf_data_workers=1", *extra, "--dlperf-json", "results.json",
            "-v", *args)


def run_data(dlperf, image_folder, *args, data_dir=True):
    return dlperf.run(*data_args(image_folder, *args, data_dir=data_dir))


def check_loader_figures(loader, backend, mode, image_folder, ranks=1):
    sizes = file_sizes(image_folder)
    assert loader["backend"] == backend and loader["mode"] == mode and loader["workers"] == 1
    assert loader["decoder"] == "cpu"
    assert min(sizes) <= loader["bytes_per_sample"] <= max(sizes)
    assert loader["megabytes_per_second"] > 0 and loader["samples_per_second"] > 0
    # FAST: 2 windows of 5 steps of BATCH images on every rank.
    assert loader["samples"] == 2 * 5 * BATCH * ranks
    assert loader["megabytes_per_second"] == pytest.approx(loader["bytes"] / loader["seconds"] / 1e6)


def training_on_one_and_two_ranks(shared_run, image_folder, backend):
    """One session per backend: tiny on 1 rank, then on 2 (whose scaling reference is the 1-rank case: a
    2-rank case alone would measure a 1-rank reference of its own)."""
    return shared_run(f"data: training with {backend} on 1 and 2 ranks",
                      *data_args(image_folder, "--dlperf-model", "tiny", "--dlperf-set", f"data={backend}",
                                 "--dlperf-gpus", "1,2"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_reads_batches_from_the_backend_and_reports_its_mb_per_second(shared_run, image_folder, backend):
    session = training_on_one_and_two_ranks(shared_run, image_folder, backend)
    session.result.assert_outcomes(passed=2)
    session.result.stdout.fnmatch_lines([f"*tiny-fp32-bs16-gpu1-{backend} PASSED (no baseline)*"])
    document = session.tester.results()
    jsonio.validate(document, "results")
    record = document["cases"][0]
    assert record["id"] == f"tiny-fp32-bs16-gpu1-{backend}"
    assert record["case"]["settings"] == {"data": backend}
    check_loader_figures(record["data"], backend, "training", image_folder)
    assert record["data"]["samples_per_second"] == pytest.approx(record["throughput"])
    assert f"input: {backend} loader (1 " in record["message"] and "MB/s of image files" in record["message"]
    run = record["attempts"][0]["runs"][0]
    assert run["data"]["mode"] == "training" and run["final_loss"] is not None and run["flops"]
    worker = jsonio.load(Path(run["log_dir"]) / "result-rank0.json", "result")
    assert worker["data"]["bytes"] == run["data"]["bytes"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_ranks_shard_the_data(shared_run, image_folder, backend):
    session = training_on_one_and_two_ranks(shared_run, image_folder, backend)
    session.result.assert_outcomes(passed=2)
    record = session.tester.results()["cases"][1]
    assert record["id"] == f"tiny-fp32-bs16-gpu2-{backend}"
    check_loader_figures(record["data"], backend, "training", image_folder, ranks=2)
    run = record["attempts"][0]["runs"][0]
    per_rank = [r["data"] for r in run["ranks"]]
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert all(r["samples"] == 2 * 5 * BATCH and r["bytes"] > 0 for r in per_rank)
    assert sum(r["bytes"] for r in per_rank) == run["data"]["bytes"]


def test_data_only_times_each_loader_and_is_not_judged(dlperf, image_folder):
    backends = ["torchvision", "dali"] if dali_available() else ["torchvision"]
    path = dlperf.baseline([tiny_case(1e9, batch_size=BATCH, settings={"data": b}) for b in backends]
                           + [tiny_case(1.0, batch_size=BATCH)])
    result = run_data(dlperf, image_folder, "--dlperf-baseline", path, "--dlperf-data-only", "-rs")
    result.assert_outcomes(passed=len(backends), skipped=1)
    result.stdout.fnmatch_lines([
        *(f"*tiny-fp32-bs16-gpu1-{b} PASSED (data-only)*" for b in backends),
        "tiny (img/s; *",
        "   1 | * data-only (* MB/s) | *",
        f"data-only: the data loader alone, not judged ({len(backends)}):",
        "  tiny-fp32-bs16-gpu1-torchvision: data-only: torchvision loader (1 worker per rank): * img/s, "
        "* MB/s of image files (* kB per image); the loader alone, not judged against a training-throughput "
        "baseline; slower than the baseline's training throughput 1000000000.0 img/s: this case is input-bound",
        "*--dlperf-data-only times a data loader; this case's data is synthetic (set data=torchvision or data=dali)*",
    ])
    document = dlperf.results()
    jsonio.validate(document, "results")
    for record in document["cases"][:len(backends)]:
        assert record["verdict"] == "data-only" and record["throughput"] is None and record["difference"] is None
        backend = record["case"]["settings"]["data"]
        check_loader_figures(record["data"], backend, "data-only", image_folder)
        assert record["data"]["samples_per_second"] == pytest.approx(record["stats"]["median"])
        run = record["attempts"][0]["runs"][0]
        assert run["final_loss"] is None and run["flops"] is None  # no model was trained
    assert document["cases"][-1]["verdict"] == "skipped"


def test_data_only_on_two_ranks(dlperf, image_folder):
    result = run_data(dlperf, image_folder, "--dlperf-model", "tiny", "--dlperf-set", "data=torchvision",
                      "--dlperf-gpus", "2", "--dlperf-data-only")
    result.assert_outcomes(passed=1)
    record = dlperf.results()["cases"][0]
    assert record["verdict"] == "data-only" and record.get("scaling") is None
    check_loader_figures(record["data"], "torchvision", "data-only", image_folder, ranks=2)


# --------------------------------------------------------------------------- usage errors


def test_a_real_backend_without_a_data_dir_is_a_usage_error_naming_the_case(dlperf, image_folder):
    result = run_data(dlperf, image_folder, "--dlperf-model", "tiny", "--dlperf-set", "data=dali", data_dir=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dlperf-set data=dali: case tiny-fp32-bs16-gpu1-dali: data=dali reads "
                                 "images from --dlperf-data-dir (ini: dlperf_data_dir), which is not set*"])


def test_a_data_dir_that_is_not_an_image_folder_is_a_usage_error(dlperf, tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"not in a class folder")
    path = dlperf.baseline([tiny_case(1.0, settings={"data": "torchvision"})])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-data-dir", str(tmp_path / "flat"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --dlperf-data-dir: {tmp_path}/flat has no class subfolders; expected an "
                                 "ImageFolder layout: one subfolder per class with the images in it "
                                 "(DIR/CLASS/IMAGE.jpg)"])


TEXT_MODEL = textwrap.dedent("""
    import torch
    from pytest_dlperf import register_model

    @register_model("texty", make_batch=lambda b, s, d: torch.zeros(b, 4, device=d),
                    loss=lambda m, x: m(x).sum(), unit="seq/s")
    def texty(settings):
        return torch.nn.Linear(4, 1)
""")


def test_a_data_backend_on_a_model_that_is_not_image_classification_is_a_usage_error(dlperf, image_folder):
    dlperf.pytester.makeconftest(TEXT_MODEL)
    path = dlperf.baseline([{"model": "texty", "precision": "fp32", "batch_size": 8, "throughput": 1.0,
                             "settings": {"data": "torchvision"}}])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-data-dir", str(image_folder))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {path}: $.cases[0].settings.data: case texty-fp32-bs8-gpu1-torchvision: "
                                 "data=torchvision applies to image-classification models; model 'texty' has no task"])


def test_the_data_dir_from_the_ini_file_is_relative_to_it(dlperf, image_folder):
    os.symlink(image_folder, dlperf.path / "imagenet-mini")
    dlperf.pytester.makeini("[pytest]\ndlperf_data_dir = imagenet-mini\ndlperf_data_workers = 0\n")
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-set", "data=torchvision", "--dlperf-batch-size", "8",
                        "--dlperf-json", "results.json")
    result.assert_outcomes(passed=1)
    record = dlperf.results()["cases"][0]
    assert record["parameters"]["data_dir"] == str(image_folder.resolve())
    assert record["data"]["workers"] == 0 and record["data"]["bytes"] > 0
