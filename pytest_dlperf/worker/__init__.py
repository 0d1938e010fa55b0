"""The worker side: what runs on each rank, in a fresh process.

``python -m pytest_dlperf.worker SPEC.json`` (:mod:`.main`) builds the model, trains it for
the warm-up and the measured windows and writes one JSON result (:mod:`pytest_dlperf.protocol`
describes both documents).  Its pieces: :mod:`.training` (one training step per
precision), :mod:`.distributed` (ranks and the process group), :mod:`.memory` (the memory
cap of the largest-batch search), :mod:`.telemetry` (NVML and host sampler, the host part in
:mod:`.host`), :mod:`.flops` (FLOPs per sample and MFU), :mod:`.phaseclock` (the phases of the
steps in each window; their figures, which the controller reads too: :mod:`.phases`).  Nothing here
imports the controller.
"""
