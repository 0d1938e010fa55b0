"""Reporting: what a session's results become for people and other tools.

* :mod:`.summary`: the terminal summary table and the readers the other reports share;
* :mod:`.markdown`: ``--dlperf-report``, the Markdown report in the seeds' structure;
* :mod:`.plots`: ``--dlperf-plot``, throughput vs GPUs and measured vs baseline PNGs;
* :mod:`.benchmark_json`: each case as a pytest-benchmark benchmark.
"""
