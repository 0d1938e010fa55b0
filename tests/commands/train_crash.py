"""Trains two steps for real, then dies: ``python train_crash.py oom`` raises an out-of-memory error, else a bug."""
import sys

import torch

model = torch.nn.Linear(64, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(16, 64)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {step} batch_cost 0.001 s", flush=True)
if sys.argv[1:] == ["oom"]:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
raise RuntimeError("the data pipeline lost its shard")
