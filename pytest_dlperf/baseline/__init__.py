"""Baselines: the figures cases are judged against, read, saved, edited and chosen per machine.

:mod:`.document` (a baseline file read and written: :class:`Baseline`, :class:`Entry`, :func:`load`,
:func:`save`), :mod:`.measured` (the document a session's measured cases make, the runs and host probes each
entry keeps), :mod:`.machines` (a folder of baselines, one per machine class: the file of this machine, or
one recorded here) and :mod:`.edit` (``dlperf baseline diff / update``).  The names below are the
package's face: what the plugin, the commands and a conftest reach for.
"""

from .document import (DEFAULT_TOLERANCE, PROBE_FIELDS, STEP_DEFAULTS, STEP_FIELDS, VERSION_2_FIELDS, Baseline, Entry,
                       compile_mismatch, device_mismatch, host_cpu_mismatch, index, load, measured_on, method,
                       plain_case, record_method, save, start_mismatch)
from .measured import (SLOWER_HOST_NOTE, ProbeReference, add_slower_host_note, drop_slower_host_note, from_measurements,
                   hardware_from, kept_runs, slower_host)

__all__ = ["DEFAULT_TOLERANCE", "PROBE_FIELDS", "SLOWER_HOST_NOTE", "STEP_DEFAULTS", "STEP_FIELDS", "VERSION_2_FIELDS",
           "Baseline", "Entry", "ProbeReference", "add_slower_host_note",
           "compile_mismatch", "device_mismatch", "drop_slower_host_note", "from_measurements", "hardware_from",
           "host_cpu_mismatch", "index",
           "kept_runs", "load", "measured_on", "method", "plain_case", "record_method", "save", "slower_host",
           "start_mismatch"]
