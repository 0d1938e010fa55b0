"""How a run that died reads: one wording for a signal, whoever reports it; a SIGKILL names the likely killer."""

from __future__ import annotations

import textwrap

from pytest_dlperf.launch import process

SIGNALS = textwrap.dedent("""
    import os, signal
    from torch import nn
    from pytest_dlperf import register_model

    class Dies(nn.Module):
        def __init__(self, sig):
            super().__init__()
            self.sig = sig
            self.fc = nn.Linear(3 * 4 * 4, 2)

        def forward(self, x):
            if os.environ.get("RANK", "0") == os.environ.get("DIE_ON_RANK", "0"):
                os.kill(os.getpid(), self.sig)
            return self.fc(x.flatten(1))

    for name, sig in (("killed", signal.SIGKILL), ("segv", signal.SIGSEGV)):
        register_model(name, task="image-classification", batch_size=8, defaults={"image_size": 4, "num_classes": 2},
                       factory=lambda settings, sig=sig: Dies(sig))
""")


def test_a_sigkilled_worker_says_it_may_have_been_the_out_of_memory_killer(dlperf):
    dlperf.pytester.makeconftest(SIGNALS)
    result = dlperf.run("--dlperf-model", "killed")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["killed-fp32-bs8-gpu1: the worker ended with signal SIGKILL (killed: perhaps by "
                                 "the kernel's out-of-memory killer; `dmesg` says) and wrote no result*"])


def test_a_segfault_on_one_rank_of_two_reads_as_a_signal_as_on_one_rank(dlperf, monkeypatch):
    dlperf.pytester.makeconftest(SIGNALS)
    monkeypatch.setenv("DIE_ON_RANK", "1")
    result = dlperf.run("--dlperf-model", "segv", "--dlperf-gpus", "2")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "segv-fp32-bs8-gpu2: rank 1 (signal SIGSEGV) died" in out
    assert "exit status -11" not in out


def test_exit_statuses_have_one_wording():
    assert process.describe_returncode(-11) == "signal SIGSEGV"
    assert process.describe_returncode(7) == "exit status 7"
