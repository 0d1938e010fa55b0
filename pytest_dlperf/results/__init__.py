"""Results: the typed records of what a session measured and judged, converted to dicts only at the JSON edge.

:mod:`.case` (:class:`~.case.CaseResult`: one case's verdict, message, figures and where they came from;
its :class:`~.case.Status`, the :class:`~.case.Expected` figure it was judged against, its scaling and
utilization gates), :mod:`.runs` (one record per fresh run, a case's runs as an attempt) and
:mod:`.telemetry` (readers of the workers' telemetry summaries every report shares).  ``--dlperf-json``
writes them as the results document (``schemas/results.schema.json``).
"""
