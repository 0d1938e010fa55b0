"""Whose hardware a baseline's figures are: GPU and CPU model names compared as people write them.

A baseline names the GPU or CPU its figures were measured on (``hardware``); a session compares it with
this machine's (:func:`pytest_dlperf.baseline.document.device_mismatch`) and picks a folder's file by it
(:mod:`.machines`).  Names differ in vendor words, trademark signs and how far they go ("A100" and
"NVIDIA A100-SXM4-80GB"); these functions say when two of them mean the same model.
"""

from __future__ import annotations

import re

_VENDOR_WORDS = {"nvidia", "tesla"}


def normalize_gpu_name(name: str) -> str:
    """A GPU name for comparison: lower case, words split at spaces, dashes and underscores,
    without the "NVIDIA" / "Tesla" vendor words ("Tesla V100-SXM2-16GB" -> "v100 sxm2 16gb")."""
    words = [w for w in re.split(r"[\s_\-]+", name.lower()) if w and w not in _VENDOR_WORDS]
    return " ".join(words)


def same_gpu_model(a: str, b: str) -> bool:
    """Whether two GPU names mean the same model; the less specific name may stop early
    ("A100" matches "NVIDIA A100-SXM4-80GB"; "V100-SXM2-16GB" does not match "V100-SXM2-32GB")."""
    wa, wb = normalize_gpu_name(a).split(), normalize_gpu_name(b).split()
    shorter, longer = sorted((wa, wb), key=len)
    return bool(shorter) and longer[:len(shorter)] == shorter


# --------------------------------------------------------------------------- CPU names


_CPU_NOISE = re.compile(r"\((?:r|tm|c)\)|@.*$|\b\d+-core\b|\b(?:cpu|processor)\b")


def normalize_cpu_name(name: str) -> str:
    """A CPU name for comparison: lower case, without the trademark signs, the clock after "@",
    "N-Core" and the words "CPU" / "Processor" ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    -> "intel xeon platinum 8481c", "AMD EPYC 7B13 64-Core Processor" -> "amd epyc 7b13")."""
    text = _CPU_NOISE.sub(" ", name.lower())
    return " ".join(w for w in re.split(r"[\s_,()]+", text) if w)


def same_cpu_model(a: str, b: str) -> bool:
    """Whether two CPU names mean the same model; the less specific name may stop early, as for
    GPUs ("AMD EPYC", a virtual machine's name, matches "AMD EPYC 7B13"), but a vendor alone
    matches nothing ("Intel" does not match "Intel Xeon Platinum 8481C")."""
    wa, wb = normalize_cpu_name(a).split(), normalize_cpu_name(b).split()
    if wa == wb:
        return bool(wa)
    shorter, longer = sorted((wa, wb), key=len)
    return len(shorter) >= 2 and longer[:len(shorter)] == shorter
