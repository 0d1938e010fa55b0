"""Trains a small MLP for real and logs like NVIDIA DLLogger's JSON stream: ``DLLL {json}`` per step.

Usage: python train_dllogger.py --batch-size 32 --steps 12 [--amp] [--data-ms 20]
Only rank 0 logs (as DeepLearningExamples' scripts do); train.total_ips is the whole job's.  As DeepLearningExamples'
ConvNets trainer (image_classification/training.py, logger.py), a step's train.data_time (the wait for its batch,
--data-ms longer) and train.compute_time (the rest) are on a second line of the same step, their verbosity's.  SGD
(and, on several ranks, the gradients' mean) by hand: by_hand.py.
"""
import argparse
import json
import os
import sys
import time

import torch
from by_hand import SGD

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--amp", action="store_true")
parser.add_argument("--data-ms", type=float, default=0.0)
args = parser.parse_args()

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
if world > 1:
    torch.distributed.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = SGD(model.parameters(), lr=0.01, momentum=0.9)


def batches():
    """A loader that takes --data-ms to give each batch."""
    while True:
        time.sleep(args.data_ms / 1000)
        yield torch.randn(args.batch_size, 256), torch.randint(0, 10, (args.batch_size,))


def log(step, data):
    if rank == 0:
        print("DLLL " + json.dumps({"timestamp": str(time.time()), "type": "LOG", "step": step, "data": data}),
              flush=True)


log("PARAMETER", {"batch_size": args.batch_size, "amp": args.amp})
figures = []
loader = batches()
for i in range(1, args.steps + 1):
    start = time.perf_counter()
    x, y = next(loader)
    data_time = time.perf_counter() - start
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    it_time = time.perf_counter() - start
    ips = args.batch_size * world / it_time
    figures.append(ips)
    log([1, i], {"train.loss": loss.item(), "train.total_ips": ips})
    log([1, i], {"train.data_time": data_time, "train.compute_time": it_time - data_time})
log([1], {"train.loss": loss.item()})
log([], {"train.total_ips": sum(figures) / len(figures)})
if world > 1:
    del model, optimizer, loss  # before the group, and no exit through static destructors: see train_plain.py
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)
