"""The gate: a case's runs as evidence, the sequential verdict, and the messages that report it.

:mod:`.stats` (window statistics), :mod:`.figures` (each run's figure, whether it was busy, its host
probes), :mod:`.evidence` (the interval of the case's figure and its decision), :mod:`.drift` (the drift
between sessions in the interval), :mod:`.looks` (the looks' boundaries), :mod:`.sequential` (one fresh run
at a time until decided or out of budget), :mod:`.verdict` (the throughput, scaling and utilization gates
and the case's message), :mod:`.rules` (the rules, listed once: the README's table), :mod:`.tolerance`
(what a saved baseline's noise lets its tolerance decide), :mod:`.far` (a run far off its baseline, cut short),
:mod:`.format` (how figures read in messages
and reports).  Nothing here starts a process: the runs come in as records.
"""
