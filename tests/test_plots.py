"""``--dlperf-plot``: the plots' data from a results document, the PNGs, the option."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from tests.fixtures import tiny_case
from pytest_dlperf.reporting import plot_data, plots
from pytest_dlperf.cases import Case
from pytest_dlperf.results.case import CaseResult, cases_from

PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("matplotlib")


def record(model: str, precision: str, batch: int, gpus: int, throughput: float | None, *,
           unit: str = "img/s", baseline: float | None = None, tolerance: float = 0.05,
           verdict: str | None = None, reference: tuple[float, str] | None = None,
           minimum: float | None = None, settings: dict | None = None, spread: float = 0.04) -> dict[str, Any]:
    """A case record as the plugin writes it, with the figures that the plots read."""
    case = Case.make(model, precision, batch, gpus, settings)
    rec: dict[str, Any] = {"id": case.id, "case": case.to_dict(), "unit": unit, "throughput": throughput,
                           "stats": None, "baseline": None, "difference": None, "scaling": None,
                           "message": "...", "attempts": []}
    if throughput is None:
        return dict(rec, verdict=verdict or "error", unit=None if verdict == "skipped" else unit)
    rec["stats"] = {"n": 5, "median": throughput, "mean": throughput, "min": throughput * (1 - spread),
                    "max": throughput * (1 + spread / 2), "stdev": 1.0, "cv": 0.01}
    own = "no-baseline"
    if baseline is not None:
        diff = throughput / baseline - 1
        own = "fail" if diff < -tolerance else "improved" if diff > tolerance else "pass"
        rec.update(baseline={"throughput": baseline, "tolerance": tolerance, "source": "test", "unit": unit},
                   difference=diff)
    if reference is not None:
        speedup = throughput / reference[0]
        rec["scaling"] = {"ranks": gpus, "reference": reference[0], "reference_source": reference[1],
                          "speedup": speedup, "efficiency": speedup / gpus, "minimum": minimum}
    rec.update(throughput_verdict=own, verdict=verdict or own)
    return rec


def document(*records: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "kind": "dlperf-results", "created": "2026-01-01T00:00:00+00:00",
            "environment": {}, "options": {}, "baseline": None, "cases": list(records)}


def cases(*records: dict[str, Any]) -> list[CaseResult]:
    """The records as the plots take them: typed, as ``dlperf plot`` reads a results file."""
    return cases_from(document(*records))


SESSION_1GPU = (1000.0, "this session")


def synthetic_document() -> dict[str, Any]:
    """resnet50 amp at 1/2/4/8 GPUs (8 fails its baseline), fp32 at 8 only (1-GPU reference from the
    baseline), a 1-GPU-only bert, an error and a skipped case."""
    return document(
        record("resnet50", "amp", 256, 1, 1000.0, baseline=980.0),
        record("resnet50", "amp", 256, 2, 1900.0, reference=SESSION_1GPU),
        record("resnet50", "amp", 256, 4, 3600.0, reference=SESSION_1GPU, baseline=3500.0),
        record("resnet50", "amp", 256, 8, 6000.0, reference=SESSION_1GPU, baseline=7600.0, minimum=0.8,
               verdict="fail"),
        record("resnet50", "amp", 128, 1, 900.0),
        record("resnet50", "fp32", 128, 8, 3000.0, reference=(400.0, "baseline"), baseline=3100.0),
        record("bert-base", "amp", 64, 1, 420.0, unit="seq/s", baseline=400.0, settings={"seq_len": 512}),
        record("resnet50", "amp", 512, 8, None, verdict="error"),
        record("vgg16", "fp32", 64, 2, None, verdict="skipped"),
    )


def synthetic() -> list[CaseResult]:
    """:func:`synthetic_document`'s cases, typed."""
    return cases_from(synthetic_document())


# --------------------------------------------------------------------------- the plots' data


def test_scaling_plots_group_model_and_precision_with_one_line_per_config():
    found, notes = plot_data.scaling_plots(synthetic())
    assert [(p.model, p.precision, p.filename) for p in found] == [
        ("resnet50", "amp", "throughput-vs-gpus-resnet50-amp.png"),
        ("resnet50", "fp32", "throughput-vs-gpus-resnet50-fp32.png"),
    ]
    amp = found[0]
    assert [line.label for line in amp.lines] == ["bs256"]  # bs128 has a 1-GPU case only
    assert amp.gpu_counts == [1, 2, 4, 8]
    assert notes == ["throughput vs GPUs: 1-GPU cases only, left out: resnet50 amp bs128",
                     "throughput vs GPUs: 1-GPU cases only, no plot: bert-base amp"]


def test_a_scaling_line_has_medians_spread_efficiency_ideal_and_baseline():
    line = plot_data.scaling_plots(synthetic())[0][0].lines[0]
    assert [(p.gpus, p.throughput) for p in line.points] == [(1, 1000.0), (2, 1900.0), (4, 3600.0), (8, 6000.0)]
    assert line.points[3].low == pytest.approx(6000 * 0.96) and line.points[3].high == pytest.approx(6000 * 1.02)
    assert [p.efficiency for p in line.points] == [None, pytest.approx(0.95), pytest.approx(0.9), pytest.approx(0.75)]
    assert (line.reference, line.reference_source) == (1000.0, "this session")
    assert line.ideal([1, 2, 4, 8]) == [(1, 1000.0), (2, 2000.0), (4, 4000.0), (8, 8000.0)]
    assert line.baseline == ((1, 980.0), (4, 3500.0), (8, 7600.0))


def test_without_a_1gpu_case_the_ideal_line_starts_from_the_recorded_reference():
    fp32 = plot_data.scaling_plots(synthetic())[0][1]
    (line,) = fp32.lines
    assert (line.reference, line.reference_source) == (400.0, "baseline")
    assert line.baseline == ((1, 400.0), (8, 3100.0))  # the baseline's 1-GPU figure is a baseline point
    assert line.points[0].efficiency == pytest.approx(3000 / 3200)
    assert fp32.gpu_counts == [1, 8]


def test_settings_that_differ_make_lines_of_their_own():
    doc = document(record("resnet50", "amp", 256, 1, 1000.0), record("resnet50", "amp", 256, 2, 1800.0),
                   record("resnet50", "amp", 256, 1, 1500.0, settings={"image_size": 160}),
                   record("resnet50", "amp", 256, 2, 2900.0, settings={"image_size": 160}))
    (plot,), notes = plot_data.scaling_plots(cases_from(doc))
    assert [line.label for line in plot.lines] == ["bs256", "bs256 img160"]
    assert [p.efficiency for p in plot.lines[1].points] == [None, pytest.approx(2900 / 3000)]
    assert plot.title == "resnet50 amp: throughput vs GPUs" and notes == []


def test_comparison_plots_one_per_unit_without_error_or_skipped_cases():
    found = plot_data.comparison_plots(synthetic())
    assert [(p.unit, p.filename) for p in found] == [("img/s", "measured-vs-baseline-img-s.png"),
                                                     ("seq/s", "measured-vs-baseline-seq-s.png")]
    img = {b.case_id: b for b in found[0].bars}
    assert list(img) == ["resnet50-amp-bs256-gpu1", "resnet50-amp-bs256-gpu2", "resnet50-amp-bs256-gpu4",
                         "resnet50-amp-bs256-gpu8", "resnet50-amp-bs128-gpu1", "resnet50-fp32-bs128-gpu8"]
    failing = img["resnet50-amp-bs256-gpu8"]
    assert (failing.verdict, failing.baseline, failing.band) == ("fail", 7600.0, (7220.0, 7980.0))
    assert failing.text == "6,000 (-21.1%) FAIL"
    assert img["resnet50-amp-bs256-gpu2"].text == "1,900, no baseline"
    assert img["resnet50-amp-bs256-gpu4"].text == "3,600 (+2.9%)"
    assert found[1].bars[0].verdict == "improved"
    assert found[0].title == "Measured vs baseline throughput (img/s)"
    only = plot_data.comparison_plots(cases(record("tiny", "fp32", 32, 1, 10.0)))[0]
    assert only.title == "Measured throughput (img/s); no case has a baseline"


def test_a_case_failed_by_its_scaling_gate_says_so():
    rec = record("tiny", "fp32", 32, 2, 2000.0, baseline=2000.0, reference=(3000.0, "this session"),
                 minimum=0.8, verdict="fail")
    item = plot_data.bar(CaseResult.from_dict(rec))
    assert (item.verdict, item.failed_by, item.text) == ("fail", "scaling efficiency", "2,000 (+0.0%) FAIL: "
                                                                                        "scaling efficiency")


def test_left_out_cases_are_noted():
    assert plot_data.left_out_note(synthetic()) == ("left out of the plots (no throughput): "
                                                    "resnet50-amp-bs512-gpu8 (error), vgg16-fp32-bs64-gpu2 (skipped)")
    assert plot_data.left_out_note(cases(record("tiny", "fp32", 32, 1, 10.0))) is None


@pytest.mark.parametrize("text, expected", [("img/s", "img-s"), ("tokens/s", "tokens-s"), ("ResNet 50", "resnet-50"),
                                            ("../../etc", "etc"), ("???", "x")])
def test_file_name_parts_are_safe(text, expected):
    assert plot_data.slug(text) == expected


# --------------------------------------------------------------------------- the figures


def test_the_scaling_figure_draws_ideal_measured_and_baseline_on_a_log2_axis():
    plot = plot_data.scaling_plots(synthetic())[0][0]
    ax = plots.scaling_figure(plot).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    ideal = lines["ideal linear scaling (1 GPU: this session)"]
    assert list(ideal.get_xdata()) == [1, 2, 4, 8] and list(ideal.get_ydata()) == [1000, 2000, 4000, 8000]
    (measured,) = ax.containers  # errorbar's: the line and its error bars
    assert measured.get_label() == "measured"
    assert list(measured.lines[0].get_ydata()) == [1000, 1900, 3600, 6000]
    assert list(lines["baseline"].get_xdata()) == [1, 4, 8]
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [1, 2, 4, 8]
    assert [t.get_text() for t in ax.texts] == ["95%", "90%", "75%"]
    assert ax.get_ylabel() == "throughput (img/s)"


def test_the_comparison_figure_colors_the_failing_case():
    plot = plot_data.comparison_plots(synthetic())[0]
    ax = plots.comparison_figure(plot).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [b.case_id for b in plot.bars]
    colors = [p.get_facecolor() for p in ax.patches if p.get_height() == 0.5]  # the measured bars
    red = plots.VERDICT_COLORS["fail"]
    from matplotlib.colors import to_rgba
    assert [c == to_rgba(red) for c in colors] == [False, False, False, True, False, False]
    assert "6,000 (-21.1%) FAIL" in [t.get_text() for t in ax.texts]


def test_write_plots_writes_the_pngs_and_notes(tmp_path):
    notes: list[str] = []
    written = plots.write_plots(synthetic(), tmp_path / "out", notes)
    assert [p.name for p in written] == ["throughput-vs-gpus-resnet50-amp.png", "throughput-vs-gpus-resnet50-fp32.png",
                                         "measured-vs-baseline-img-s.png", "measured-vs-baseline-seq-s.png"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in written)
    for path in written:
        with PIL.open(path) as image:
            assert image.format == "PNG" and image.size[0] >= 800
    assert len(notes) == 3 and notes[-1].startswith("left out of the plots")


def test_names_that_slug_alike_do_not_overwrite_each_other(tmp_path):
    doc = document(record("my_net", "fp32", 8, 1, 10.0), record("my_net", "fp32", 8, 2, 18.0),
                   record("my-net", "fp32", 8, 1, 11.0), record("my-net", "fp32", 8, 2, 19.0))
    names = [p.name for p in plots.write_plots(cases_from(doc), tmp_path)]
    assert names[:2] == ["throughput-vs-gpus-my-net-fp32.png", "throughput-vs-gpus-my-net-fp32-2.png"]


def test_nothing_measured_writes_no_plot(tmp_path):
    notes: list[str] = []
    assert plots.write_plots(cases(record("tiny", "fp32", 32, 1, None)), tmp_path, notes) == []
    assert notes == ["left out of the plots (no throughput): tiny-fp32-bs32-gpu1 (error)"]


# --------------------------------------------------------------------------- the option


def test_the_plot_setting_writes_pngs_of_a_real_session(dlperf):
    # From the ini file (--dlperf-plot, its twin, is read by the same code: pytest_dlperf.options).
    dlperf.pytester.makeini("[pytest]\ndlperf_plot = plots\n")
    path = dlperf.baseline([tiny_case(1e9), tiny_case(1.0, gpus=2)])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-max-runs", "1")
    result.assert_outcomes(passed=1, failed=1)
    names = ["throughput-vs-gpus-tiny-fp32.png", "measured-vs-baseline-img-s.png"]
    result.stdout.fnmatch_lines([f"dlperf: 2 plot(s) in {dlperf.path / 'plots'}: {', '.join(names)}"])
    # 8 x 5.5 inches; 10 inches wide, 1.8 + 0.55 per case high; at 100 dpi.
    for name, size in zip(names, [(800, 550), (1000, 290)]):
        with PIL.open(dlperf.path / "plots" / name) as image:
            assert (image.format, image.size) == ("PNG", size)


def test_plot_option_without_matplotlib_is_a_usage_error(dlperf):
    dlperf.pytester.makeconftest(textwrap.dedent("""
        import sys
        sys.modules["matplotlib"] = None  # as if the plot extra were not installed
    """))
    result = dlperf.run_subprocess("--dlperf-model", "tiny", "--dlperf-plot", "plots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dlperf-plot needs matplotlib (*); install it with: *"])
    assert "install it with: pip install 'pytest-dlperf[plot]'" in result.stderr.str()
    assert not (dlperf.path / "plots").exists()


def test_the_dlperf_plot_command_draws_a_results_file(tmp_path, capsys):
    from pytest_dlperf import cli

    results = tmp_path / "results.json"
    results.write_text(json.dumps(synthetic_document()))
    assert cli.main(["plot", str(results), "-o", str(tmp_path / "png")]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "png").glob("*.png"))
    assert "throughput-vs-gpus-resnet50-amp.png" in written and "measured-vs-baseline-img-s.png" in written
    assert all(name in out for name in written)
    assert cli.main(["plot", str(tmp_path / "missing.json"), "-o", str(tmp_path / "png")]) == 2
    assert "results file not found" in capsys.readouterr().err
