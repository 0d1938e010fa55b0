"""The terminal summary, from records as the plugin keeps them (no workers)."""

from pytest_dlperf.cases import Case
from pytest_dlperf.reporting.summary import render_table, summary_lines
from pytest_dlperf.results.case import CaseResult


def record(model="resnet50", precision="amp", batch=256, gpus=1, verdict="pass", throughput=100.0,
           baseline=None, attempts=1, message=None, scaling=None, **extra):
    case = Case.make(model, precision, batch, gpus)
    return {"id": case.id, "case": case.to_dict(), "unit": "img/s", "verdict": verdict,
            "throughput": throughput, "difference": None if baseline is None else throughput / baseline - 1,
            "baseline": None if baseline is None else {"throughput": baseline, "tolerance": 0.05},
            "attempts": [{}] * attempts, "message": message or f"{case.id}: {verdict}", "scaling": scaling,
            **extra}


def typed(records):
    """The records as the reports take them: typed, as ``--dlperf-json`` reads back."""
    return [CaseResult.from_dict(r) for r in records]


def test_rows_are_gpu_counts_and_columns_precision_and_batch():
    records = [
        record(gpus=1, throughput=790.0, baseline=790.0),
        record(gpus=8, throughput=5350.2, baseline=5889.1, verdict="fail",
               scaling={"ranks": 8, "reference": 790.0, "reference_source": "this session",
                        "speedup": 6.77, "efficiency": 0.846, "minimum": 0.8}),
        record(precision="fp32", gpus=1, throughput=370.2, verdict="no-baseline"),
    ]
    assert summary_lines(typed(records))[:6] == [
        "resnet50 (img/s; measured / baseline (difference); speedup over 1 GPU (efficiency))",
        "gpus | amp bs256                    | amp bs256 speedup | fp32 bs256",
        "-----+------------------------------+-------------------+-----------",
        "   1 | 790.0 / 790.0 (+0.0%)        | 1.00x             | 370.2 / -",
        # 84.6% clears the 80% minimum: only the throughput is marked.
        "   8 | 5350.2 / 5889.1 (-9.2%) FAIL | 6.77x (85%)       |",
        "",
    ]


def test_sections_say_what_needs_attention():
    records = [
        record(verdict="fail", message="a: 1.0 img/s is 99% below the baseline"),
        record(precision="fp32", verdict="improved", message="b: improved"),
        record(precision="bf16", verdict="pass", message="c: within"),
        record(precision="tf32", verdict="skipped", throughput=None, message="CUDA not available"),
    ]
    lines = summary_lines(typed(records), "baselines/v100.json")
    text = "\n".join(lines)
    assert "regressions and errors (1):\n  a: 1.0 img/s is 99% below the baseline" in text
    assert "improved: update the baseline (1):\n  b: improved" in text
    assert "c: within" not in text  # a pass needs no attention
    assert "skipped (1):\n  resnet50-tf32-bs256-gpu1: CUDA not available" in text
    assert lines[-1] == "dlperf: 1 fail, 1 improved, 1 pass, 1 skipped"


def test_render_table_aligns_columns():
    assert render_table(["gpus", "amp"], [["1", "790.0"], ["8", "5889.1"]]) == [
        "gpus | amp", "-----+-------", "   1 | 790.0", "   8 | 5889.1"]


def test_columns_come_from_the_case_not_from_parsing_its_id():
    # A model whose name contains "-gpu" must not split its column in the wrong place.
    lines = summary_lines(typed([record(model="my-gpu-net", precision="fp32", batch=8, throughput=10.0,
                                        verdict="no-baseline")]))
    assert lines[1] == "gpus | fp32 bs8"
