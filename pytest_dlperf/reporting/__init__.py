"""Reporting: what a session's results become for people and other tools.

Every module here reads the typed per-case record (:class:`pytest_dlperf.results.case.CaseResult`);
only the results document's own parts (environment, options, baseline) stay a dict.

* :mod:`.summary`: the terminal summary table and the grids, cells and utilization rows the
  Markdown report shares;
* :mod:`.markdown`: ``--dlperf-report``, the Markdown report in the seeds' structure: its
  title, environment and run logs (found, copied, linked), and writing it;
* :mod:`.markdown_tables`: the report's tables of the cases: method, throughput and speedup,
  comparison with the baseline, windows, FLOPs and utilization, verdicts;
* :mod:`.plot_data`: what each plot shows, from the cases alone (no matplotlib);
* :mod:`.plots`: ``--dlperf-plot``, drawing and writing the PNGs: throughput vs GPUs and
  measured vs baseline;
* :mod:`.benchmark_json`: each case as a pytest-benchmark benchmark;
* :mod:`.junit`: each case's figures as JUnit XML properties.
"""
