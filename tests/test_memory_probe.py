"""The worker's host probes: the memory bandwidth and the core speed a run's process got, timed outside its
windows."""

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

    class LoggedCore(wi.CoreProbe):
        def __call__(self):
            log.append("core")
            return super().__call__()

    busy = wi.Interference(probe=False, core=False)
    busy.probe, busy.core = LoggedProbe(size=1 << 20), LoggedCore()
    time_windows(Step(log), warmup_steps=0, steps=2, repeats=3, samples_per_step=1, sampler=busy,
                 between=busy.between)
    probes = ["probe", "core"]
    assert log == [*probes, "step", "step", *probes, "step", "step", *probes, "step", "step", *probes]
    assert len(busy.figures["memory_probes"]) == 4 and busy.figures["memory_gbs"] > 0
    assert len(busy.figures["core_probes"]) == 4 and busy.figures["core_gflops"] > 0
    quiet = wi.Interference(probe=False, core=False)
    quiet.start()
    quiet.stop()
    assert not any(k.startswith(("memory", "core")) for k in quiet.figures)


def test_the_core_probe_times_float32_products_in_numpy_and_says_why_not_without_it(monkeypatch):
    probe = wi.CoreProbe(size=16)
    first = probe()
    assert first > 0 and probe.flops == 2 * 16 ** 3
    assert probe.figures() == {"core_gflops": round(first, 3), "core_probes": [round(first, 3)]}
    probe.close()
    assert probe() is None  # closed: no more probes
    monkeypatch.setitem(__import__("sys").modules, "numpy", None)  # import numpy fails
    missing = wi.CoreProbe()
    assert missing() is None and missing.figures()["core_reason"].startswith("no numpy for the core probe")


def test_a_models_own_helpers_with_a_clean_environment_are_its_load_not_a_neighbours(monkeypatch):
    # Issue 53: a model that shells out with a clean environment (no DLPERF_RUN_ID) made its run read "busy: other
    # processes used 134% CPU", and its 38% slowdown ended INCONCLUSIVE.  Its descendants are the run's own.
    import subprocess
    import sys
    import time

    monkeypatch.setenv(wi.RUN_ID_VARIABLE, "issue-53-test")
    helper = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"],
                              env={})
    try:
        run = wi.Interference(probe=False, core=False)
        run.start()
        time.sleep(0.5)
        run.stop()
        assert helper.pid in {p.pid for p in wi.own_processes()}
        assert run.figures["own_processes"] >= 2
    finally:
        helper.kill()
        helper.wait()


def test_the_kernel_s_own_work_is_never_a_neighbour_s(monkeypatch):
    # Issue 53: what a run makes the kernel do (its disk writes, page faults, sockets: interrupts, softirqs and the
    # kernel threads' time) cannot be told from what a neighbour made it do, so it is counted apart
    # (kernel_cpu_percent), never as other processes' CPU, which alone can make a run busy.
    import collections

    times = collections.namedtuple("times", "user nice system idle iowait irq softirq steal guest guest_nice")
    machine = iter([times(10, 0, 5, 100, 0, 1, 1, 0, 0, 0), times(10.5, 0, 5.8, 101, 0, 1.1, 1.3, 0, 0, 0)])
    cpu = collections.namedtuple("cpu", "user system children_user children_system")

    class Thread:  # a kernel thread: a kworker whose system time grows 0.5 s, and one that exits meanwhile
        def __init__(self, pid, seconds):
            self.pid, self.seconds = pid, seconds

        def cpu_times(self):
            return cpu(0.0, self.seconds, 0.0, 0.0)

    threads = iter([[Thread(40, 3.0), Thread(41, 9.0)], [Thread(40, 3.5)]])
    monkeypatch.setattr(wi.psutil, "cpu_times", lambda: next(machine))
    monkeypatch.setattr(wi, "kernel_threads", lambda: next(threads))
    monkeypatch.setattr(wi, "own_processes", lambda: [])
    clock = iter([0.0, 1.0])
    monkeypatch.setattr(wi.time, "perf_counter", lambda: next(clock))
    run = wi.Interference(probe=False, core=False)
    run.start()
    run.stop()
    # 1.3 s of user and system time in 1 s, 0.5 s of it the kworker's; 0.4 s of interrupts and softirqs: 0.8 s
    # others'.  The thread that exited takes its 9 s of a lifetime with it, counted nowhere.
    assert run.figures["kernel_cpu_percent"] == pytest.approx(90.0)
    assert run.figures["other_cpu_percent"] == pytest.approx(80.0)


def test_the_kernel_threads_are_kthreadd_s_children():
    import os

    found = wi.kernel_threads()
    assert all(proc.pid == 2 or proc.ppid() == 2 for proc in found)
    assert os.getpid() not in {proc.pid for proc in found} and wi.interrupt_seconds() >= 0
