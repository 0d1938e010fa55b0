"""Trains a small classifier for real and logs through MLPerf's own logger, ``mlperf_logging.mllog``.

Usage: python train_mllog.py GLOBAL_BATCH EPOCHS [--target ACC] [--seed N] [--no-stop] [--hang-after N]

Only standard events of ``mlperf_logging.mllog.constants``, as the reference implementations
log them: ``init_start``/``init_stop``, ``global_batch_size``, ``train_samples``,
``run_start``, a ``block_start``/``block_stop`` per epoch (``first_epoch_num``,
``epoch_count``), ``eval_start``/``eval_accuracy``/``eval_stop`` (``epoch_num``) and
``run_stop`` with its ``status``.  Only rank 0 logs (torchrun starts several ranks: gloo).

Without ``--target`` it trains EPOCHS epochs (a throughput case's logged steps, one epoch a
block) and stops with status success.  With ``--target`` it trains until the validation
accuracy reaches it (success) or EPOCHS epochs pass (aborted), as MLPerf's time to train.
``--no-stop`` leaves out run_stop; ``--hang-after N`` stops logging after N blocks and sleeps.
It steps with SGD and, on several ranks, the ranks' mean gradient, as torch.optim and DDP do, by hand
(``by_hand.py``: without the 2 s of CPU their first use costs a process).
"""
import argparse
import os
import sys
import time

import torch
from by_hand import SGD
from mlperf_logging import mllog

parser = argparse.ArgumentParser()
parser.add_argument("global_batch", type=int)
parser.add_argument("epochs", type=int)
parser.add_argument("--target", type=float)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-stop", action="store_true")
parser.add_argument("--hang-after", type=int)
args = parser.parse_args()

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
constants = mllog.constants
mllogger = mllog.get_mllogger()


def log(method, key, value=None, metadata=None):
    if rank == 0:
        method(key=key, value=value, metadata=metadata)


log(mllogger.event, constants.CACHE_CLEAR, True)
log(mllogger.start, constants.INIT_START)
if world > 1:
    torch.distributed.init_process_group("gloo")
torch.manual_seed(args.seed)
STEPS_PER_EPOCH, FEATURES, CLASSES = 32, 64, 4
batch = args.global_batch // world
# A learnable set: each class a Gaussian blob around its own centre (the same on every rank and run).
centres = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(1234)) * 0.5
labels = torch.randint(0, CLASSES, (STEPS_PER_EPOCH * args.global_batch,))
inputs = centres[labels] + torch.randn(len(labels), FEATURES)
val_labels = torch.randint(0, CLASSES, (512,), generator=torch.Generator().manual_seed(99))
val_inputs = centres[val_labels] + torch.randn(512, FEATURES, generator=torch.Generator().manual_seed(98))
model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, CLASSES))
optimizer = SGD(model.parameters(), lr=0.005, momentum=0.9)

log(mllogger.event, constants.GLOBAL_BATCH_SIZE, args.global_batch)
log(mllogger.event, constants.TRAIN_SAMPLES, len(labels))
log(mllogger.event, constants.SEED, args.seed)
log(mllogger.end, constants.INIT_STOP)
if world > 1:
    torch.distributed.barrier()
log(mllogger.start, constants.RUN_START)
status = constants.ABORTED
for epoch in range(1, args.epochs + 1):
    if args.hang_after is not None and epoch > args.hang_after:
        time.sleep(3600)
    log(mllogger.start, constants.BLOCK_START, metadata={constants.FIRST_EPOCH_NUM: epoch, constants.EPOCH_COUNT: 1})
    order = torch.randperm(len(labels))
    for step in range(STEPS_PER_EPOCH):
        chosen = order[step * args.global_batch:(step + 1) * args.global_batch][rank * batch:(rank + 1) * batch]
        loss = torch.nn.functional.cross_entropy(model(inputs[chosen]), labels[chosen])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    log(mllogger.end, constants.BLOCK_STOP, metadata={constants.FIRST_EPOCH_NUM: epoch})
    if args.target is None:
        continue
    log(mllogger.start, constants.EVAL_START, metadata={constants.EPOCH_NUM: epoch})
    with torch.no_grad():
        accuracy = (model(val_inputs).argmax(1) == val_labels).float().mean().item()
    log(mllogger.event, constants.EVAL_ACCURACY, accuracy, metadata={constants.EPOCH_NUM: epoch})
    log(mllogger.end, constants.EVAL_STOP, metadata={constants.EPOCH_NUM: epoch})
    if accuracy >= args.target:
        status = constants.SUCCESS
        break
if args.target is None:
    status = constants.SUCCESS
if not args.no_stop:
    log(mllogger.end, constants.RUN_STOP, metadata={constants.STATUS: status})
if world > 1:
    # The model goes before the group, and no exit through static destructors: see train_plain.py.
    del model, optimizer, loss
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)
