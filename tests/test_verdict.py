import pytest

from pytest_dlperf.stats import summarize
from pytest_dlperf.verdict import FAIL, IMPROVED, NO_BASELINE, PASS, Expected, judge


def steady(value, n=5):
    return summarize([value] * n)


def test_summary_statistics():
    s = summarize([10.0, 12.0, 11.0, 9.0, 13.0])
    assert (s.n, s.median, s.min, s.max, s.mean) == (5, 11.0, 9.0, 13.0, 11.0)
    assert s.stdev == pytest.approx(1.5811, rel=1e-3)
    assert s.cv == pytest.approx(s.stdev / 11.0)
    assert summarize([5.0]).stdev == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_regression_line_reads_like_a_report():
    v = judge("resnet50-amp-bs256-gpu8", steady(5350.2), "img/s",
              Expected(5889.1, "img/s", 0.05, "seed 000, NGC PyTorch 21.03"))
    assert v.status == FAIL
    assert v.message == ("resnet50-amp-bs256-gpu8: 5350.2 img/s is 9.2% below the baseline 5889.1 img/s "
                         "(tolerance 5%; source: seed 000, NGC PyTorch 21.03)")
    assert v.difference == pytest.approx(5350.2 / 5889.1 - 1)


def test_the_threshold_itself_passes():
    assert judge("c", steady(95.0), "img/s", Expected(100.0, "img/s", 0.05)).status == PASS
    assert judge("c", steady(94.9), "img/s", Expected(100.0, "img/s", 0.05)).status == FAIL
    assert judge("c", steady(105.0), "img/s", Expected(100.0, "img/s", 0.05)).status == PASS


def test_improved_passes_with_a_hint():
    v = judge("c", steady(120.0), "seq/s", Expected(100.0, "seq/s", 0.05))
    assert v.status == IMPROVED and not v.failed
    assert "20% above the baseline 100.0 seq/s" in v.message
    assert "update the baseline" in v.message


def test_no_baseline_passes_unless_required():
    assert judge("c", steady(50.0), "img/s", None).status == NO_BASELINE
    v = judge("c", steady(50.0), "img/s", None, require_baseline=True)
    assert v.status == FAIL and "--dlperf-require-baseline" in v.message


def test_high_cv_is_said():
    noisy = summarize([100.0, 60.0, 140.0])
    v = judge("c", noisy, "img/s", Expected(100.0, "img/s", 0.05))
    assert "noisy: CV 40% over 3 windows" in v.message
    assert "noisy" not in judge("c", steady(100.0), "img/s", Expected(100.0, "img/s", 0.05)).message
