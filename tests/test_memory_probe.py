"""The worker's memory probe: the bandwidth a run's process got, timed outside its windows."""

import pytest

from pytest_dlperf.worker import interference as wi
from pytest_dlperf.worker.main import time_windows


def test_the_probe_times_copies_and_frees_its_buffers():
    probe = wi.MemoryProbe(size=1 << 20)
    first, second = probe(), probe()
    assert first > 0 and second > 0 and probe.rates == [first, second]
    figures = probe.figures()
    assert figures["memory_probes"] == [round(first, 3), round(second, 3)]
    assert figures["memory_gbs"] == pytest.approx((first + second) / 2, rel=1e-3)
    probe.close()
    assert probe() is None and probe.rates == [first, second]  # closed: no more probes


def test_no_memory_for_the_probe_is_said_not_raised(monkeypatch):
    def no_memory(size):
        raise MemoryError

    monkeypatch.setattr(wi, "bytearray", no_memory, raising=False)
    probe = wi.MemoryProbe(size=1 << 20)
    assert probe() is None and probe.figures() == {"memory_reason": "no memory for the probe's 2 MiB"}


class Step:
    def __init__(self, log):
        self.log = log

    def __call__(self):
        self.log.append("step")

    def sync(self):
        pass


def test_the_probe_runs_before_between_and_after_the_windows_never_inside():
    log = []

    class LoggedProbe(wi.MemoryProbe):
        def __call__(self):
            log.append("probe")
            return super().__call__()

    busy = wi.Interference(probe=False)
    busy.probe = LoggedProbe(size=1 << 20)
    time_windows(Step(log), warmup_steps=0, steps=2, repeats=3, samples_per_step=1, sampler=busy,
                 between=busy.between)
    assert log == ["probe", "step", "step", "probe", "step", "step", "probe", "step", "step", "probe"]
    assert len(busy.figures["memory_probes"]) == 4 and busy.figures["memory_gbs"] > 0
    quiet = wi.Interference(probe=False)
    quiet.start()
    quiet.stop()
    assert not any(k.startswith("memory") for k in quiet.figures)
