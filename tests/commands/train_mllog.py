"""Trains a small MLP for real and logs MLPerf-style ``:::MLLOG {json}`` events with tracked_stats throughput.

Usage: python train_mllog.py BATCH STEPS
"""
import json
import sys
import time

import torch

batch, steps = int(sys.argv[1]), int(sys.argv[2])


def mllog(key, value, **metadata):
    event = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": "POINT_IN_TIME", "key": key,
             "value": value, "metadata": {"file": __file__, "lineno": 0, **metadata}}
    print(":::MLLOG " + json.dumps(event), flush=True)


mllog("global_batch_size", batch)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(batch, 128), torch.randn(batch, 1)
mllog("run_start", None)
for step in range(1, steps + 1):
    start = time.perf_counter()
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    mllog("tracked_stats", {"throughput": batch / (time.perf_counter() - start)}, step=step)
mllog("run_stop", None, status="success")
