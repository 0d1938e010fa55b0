"""Fits y = 3x + 1 by gradient descent (pure Python: no torch import, it starts in milliseconds), logs two
steps, then dies: ``python train_crash.py oom`` with an out-of-memory error as frameworks print it, else a bug."""
import sys
import time

w, b = 0.0, 0.0
for step in range(2):
    start = time.perf_counter()
    for x in range(-50, 50):
        x /= 50
        error = w * x + b - (3 * x + 1)
        w, b = w - 0.05 * error * x, b - 0.05 * error
    print(f"iter {step} batch_cost {time.perf_counter() - start:.6f} s w {w:.3f}", flush=True)
if sys.argv[1:] == ["oom"]:
    raise MemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
raise RuntimeError("the data pipeline lost its shard")
