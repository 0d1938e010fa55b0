"""``--dlperf-max-memory SIZE``: a memory cap for every worker, so that ``batch_size: "max"`` finds a limit.

**On the CPU** the worker caps its address space (``RLIMIT_AS``) at its own virtual size
plus SIZE, once torch is imported, its OpenMP thread pool started and its lazy imports
done (:func:`warm_framework`), before the model is built.  SIZE is then the memory the
training may *add* to the framework's own footprint: importing torch alone maps about
3 GB of virtual address space, which the cap does not count.

What the training adds counts as address space, not as resident pages: its tensors, the
stack of a thread it starts (8 MiB), and with ``compile`` the compiler's own memory.  So
that address space follows the memory in use, malloc is tuned under the cap
(:func:`_tune_malloc`): threads share one arena, and blocks of 1 MiB or more are mapped
and unmapped directly.  The OpenMP pool is started before the cap: its threads, which
the training needs at any batch, are part of the footprint and always start.

An allocation past the cap fails as torch's ``DefaultCPUAllocator: can't allocate
memory`` (or Python's ``MemoryError``): an out-of-memory, exit status 3.  Under the cap,
a thread that cannot start and oneDNN's "could not create a primitive" (how a
convolution reports that it got no memory) count as out-of-memory too.

**On CUDA** the worker calls ``torch.cuda.set_per_process_memory_fraction(SIZE / total)``
on its device: the caching allocator raises ``torch.OutOfMemoryError`` past SIZE.
"""

from __future__ import annotations

import os
import re
from typing import Any

UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
         "t": 1000**4, "tb": 1000**4, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SIZE_FORMAT = "a number of bytes with an optional unit, like 2GiB, 1500MB or 512MiB"


def parse_size(option: str, text: str | int) -> int:
    """Bytes from ``2GiB``, ``1500MB``, ``1.5G`` or a plain number; ValueError naming ``option`` otherwise.

    KB, MB, GB, TB (and K, M, G, T) are powers of 1000; KiB, MiB, GiB, TiB powers of 1024.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in UNITS:
        raise ValueError(f"{option}: {str(text)!r} is not a size; expected {SIZE_FORMAT}")
    size = int(float(match.group(1)) * UNITS[unit])
    if size < 1:
        raise ValueError(f"{option}: {str(text)!r} is not allowed; expected a size above 0 ({SIZE_FORMAT})")
    return size


def virtual_size() -> int:
    """This process's virtual address space in bytes (``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        pages = int(handle.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def warm_framework() -> None:
    """Start what any training starts, whatever its batch: the OpenMP threads and the lazy imports.

    One parallel CPU operation starts the thread pool; one optimizer step of a 4-parameter
    model imports what torch imports on first use (creating an optimizer imports
    ``torch._dynamo``: about 260 MB of address space).
    """
    import torch

    torch.ones(1 << 20).mul_(2).sum()
    weight = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([weight], lr=0.1, momentum=0.9)
    (weight * 2).sum().backward()
    optimizer.step()


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -3, -4, -8  # glibc's malloc.h
MMAP_THRESHOLD = 1 << 20
#: glibc's defaults, which ``dlperf_malloc steady``'s GLIBC_TUNABLES (mmap_max=0, no trim) replaced.
MMAP_MAX, TRIM_THRESHOLD = 65536, 128 * 1024


def _tune_malloc() -> None:
    """Make glibc's address space follow the memory in use, as the cap counts it.

    * One arena: a thread's first ``malloc`` otherwise reserves an arena of its own, 64 MiB
      of address space that holds almost nothing.
    * Blocks of 1 MiB and more are mapped and unmapped directly: glibc otherwise raises
      this threshold after a large block is freed (up to 32 MiB), and keeps such blocks in
      its heap, which then only grows.
    * The heap's free top is handed back, and mapping is allowed again: ``dlperf_malloc
      steady`` (the default) keeps every freed block for the next step, which under a cap on
      the address space would leave no room for what the training asks next (a thread's
      stack, seen here).  Under the cap, the cap's settings win.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_MMAP_MAX, MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def cap_cpu(size: int) -> dict[str, Any]:
    """Cap this process's address space at its current size plus ``size``; the record of the cap."""
    import resource

    warm_framework()
    _tune_malloc()
    base = virtual_size()
    limit = base + size
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and limit > hard:
        limit = hard
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return {"bytes": size, "how": "RLIMIT_AS", "base_bytes": base, "limit_bytes": limit}


def cap_cuda(size: int, device) -> dict[str, Any]:
    """Let the caching allocator on ``device`` use at most ``size`` bytes; the record of the cap."""
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(1.0, size / total)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return {"bytes": size, "how": "cuda memory fraction", "fraction": fraction, "total_bytes": total}


def apply_cap(size: int, device) -> dict[str, Any]:
    """Cap the worker's memory on ``device`` (a ``torch.device``) at ``size`` bytes, as the module says."""
    return cap_cuda(size, device) if device.type == "cuda" else cap_cpu(size)


CAP_FAILURES = ("can't start new thread", "could not create a primitive")


def is_cap_failure(exc: BaseException) -> bool:
    """A failure that, under a cap, means the cap was reached: a thread that could not start, or oneDNN's."""
    return isinstance(exc, RuntimeError) and any(text in str(exc) for text in CAP_FAILURES)
