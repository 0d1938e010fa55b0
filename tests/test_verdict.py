import pytest

from pytest_dlperf.gate.stats import summarize


def test_summary_statistics():
    s = summarize([10.0, 12.0, 11.0, 9.0, 13.0])
    assert (s.n, s.median, s.min, s.max, s.mean) == (5, 11.0, 9.0, 13.0, 11.0)
    assert s.stdev == pytest.approx(1.5811, rel=1e-3)
    assert s.cv == pytest.approx(s.stdev / 11.0)
    assert summarize([5.0]).stdev == 0.0
    with pytest.raises(ValueError):
        summarize([])
