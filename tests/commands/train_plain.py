"""Trains a small convnet for real with plain ``print`` logging, one line per step on every rank.

Usage: python train_plain.py BATCH STEPS   (torchrun starts several ranks: gloo, gradients averaged as DDP does,
by hand: by_hand.py)
Prints e.g. ``[rank 1] iter 7 loss 2.3012 batch_cost 0.01234 s``, as Paddle-style loggers do.
"""
import os
import sys
import time

import torch
from by_hand import SGD

batch, steps = int(sys.argv[1]), int(sys.argv[2])
world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
if world > 1:
    torch.distributed.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(8, 10))
optimizer = SGD(model.parameters(), lr=0.1)
x, y = torch.randn(batch, 3, 16, 16), torch.randint(0, 10, (batch,))
for step in range(1, steps + 1):
    start = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"[rank {rank}] iter {step} loss {loss.item():.4f} batch_cost {time.perf_counter() - start:.5f} s", flush=True)
if world > 1:
    # The model goes before the group: a DDP model left alive at exit made gloo abort the process in
    # about 1 run in 10 (https://github.com/pytorch/pytorch/pull/179291), after all the steps.
    del model, optimizer, loss
    torch.distributed.destroy_process_group()
    # Deleting them made it rarer (0 in 40 here), not gone: CI still met "terminate called without an
    # active exception" from a gloo thread torn down in the interpreter's exit.  Every line is out and
    # the group is gone, so leave without the C++ static destructors.
    sys.stdout.flush()
    os._exit(0)
