"""The terminal summary fits the terminal, and says when a speedup rests on noisy windows."""

from pytest_dlperf.cases import Case
from pytest_dlperf.reporting.summary import NOISY_NOTE, fit_columns, summary_lines
from pytest_dlperf.results.case import CaseResult


def result(precision="fp32", batch=32, gpus=1, throughput=100.0, cv=0.01, scaling=None):
    case = Case.make("tiny", precision, batch, gpus)
    return CaseResult.from_dict({
        "id": case.id, "case": case.to_dict(), "unit": "img/s", "verdict": "no-baseline", "message": case.id,
        "throughput": throughput, "stats": {"n": 5, "median": throughput, "mean": throughput, "min": throughput,
                                            "max": throughput, "stdev": cv * throughput, "cv": cv},
        "baseline": None, "difference": None, "attempts": [{}], "scaling": scaling})


def scaling(speedup):
    return {"ranks": 2, "reference": 100.0, "reference_source": "this session", "speedup": speedup,
            "efficiency": speedup / 2, "minimum": None}


def test_a_table_wider_than_the_terminal_is_split_and_each_part_keeps_the_gpu_counts():
    results = [result(precision=p, batch=b) for p in ("fp32", "bf16", "amp") for b in (32, 64, 128)]
    wide = summary_lines(results)
    assert max(len(line) for line in wide) > 80
    narrow = summary_lines(results, width=80)
    assert max(len(line) for line in narrow) <= 80
    assert narrow[0].startswith("tiny (img/s;") and "tiny, continued" in narrow
    headers = [line for line in narrow if line.startswith("gpus |")]
    assert len(headers) >= 2
    # Every column is still there, once.
    columns = [c.strip() for line in headers for c in line.split("|")[1:]]
    assert sorted(columns) == sorted(f"{p} bs{b}" for p in ("fp32", "bf16", "amp") for b in (32, 64, 128))


def test_fit_columns_keeps_a_column_wider_than_the_terminal_alone():
    header = ["gpus", "x" * 100, "y"]
    assert fit_columns(header, [["1", "a", "b"]], 40) == [[1], [2]]
    assert fit_columns(header, [["1", "a", "b"]], None) == [[1, 2]]


def test_a_speedup_on_noisy_windows_is_marked_and_explained():
    quiet = summary_lines([result(), result(gpus=2, throughput=190.0, scaling=scaling(1.9))])
    assert "1.90x (95%)" in "\n".join(quiet) and NOISY_NOTE not in quiet
    # The 1-GPU reference of this session varied by 40%: the 2-GPU speedup built on it is marked.
    noisy = summary_lines([result(cv=0.4), result(gpus=2, throughput=190.0, scaling=scaling(1.9))])
    assert any(line.endswith("1.90x (95%) ~") for line in noisy)
    assert NOISY_NOTE in noisy
