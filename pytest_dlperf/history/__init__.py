"""Nightly history: every judged case of every session in a database, and what it shows over time.

- :mod:`.records`: the typed rows (a session's environment, a case's figures) and how a session
  and its results become them;
- :mod:`.store`: SQLite (embedded) and PostgreSQL (a fleet) behind one interface, a versioned
  schema created on first use, transactions that keep concurrent writers whole;
- :mod:`.changepoints`: change points (ruptures' binary segmentation, a permutation test of
  significance, a Welch interval of the step), the drift of a series and the newest-step gate;
- :mod:`.analysis`: per case, its trend, change points and the environment difference across each;
  a baseline from the last N sessions of this machine class;
- :mod:`.text` and :mod:`.plot`: ``dlperf history`` lines, the report's section, the PNGs;
- :mod:`.dashboard`, :mod:`.charts` and :mod:`.html`: the history site (what it shows as typed records, its
  Plotly charts, its pages written whole);
- :mod:`.exchange`: ``dlperf history import`` (results files of earlier nights into a store, each session once)
  and ``dlperf history export`` (every night as CSV or JSON);
- :mod:`.command`: ``dlperf history`` and its parsers;
- :mod:`pytest_dlperf.controller.history`: what the pytest session does with them (options, writing, the gate).
"""
