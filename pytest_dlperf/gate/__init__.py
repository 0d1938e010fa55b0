"""The gate: a case's runs as evidence, the sequential verdict, and the messages that report it.

:mod:`.stats` (window statistics), :mod:`.evidence` (each run's figure, busy runs, the interval and its
decision), :mod:`.sequential` (one fresh run at a time until decided or out of budget), :mod:`.verdict`
(the throughput, scaling and utilization gates and the case's message), :mod:`.tolerance` (what a saved
baseline's noise lets its tolerance decide), :mod:`.format` (how figures read in messages and reports).
Nothing here starts a process: the runs come in as records.
"""
