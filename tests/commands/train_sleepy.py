"""A stand-in for a long training script (pure Python: it starts in milliseconds): logs a step every 0.2 s.

Usage: python train_sleepy.py forever PIDS_DIR   writes its pid, and that of a child it starts in a session of its
                                                 own (out of reach of a killpg), into PIDS_DIR; logs for ever
       python train_sleepy.py hang STEPS         logs STEPS steps, then nothing more, and sleeps (a hung job)
Each step's line reads ``[rank R] iter N batch_cost 0.2 s``.
"""
import os
import subprocess
import sys
import time

mode, arg = sys.argv[1], sys.argv[2]
rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
if mode == "forever":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    for pid in (os.getpid(), child.pid):
        with open(os.path.join(arg, str(pid)), "w"):
            pass
steps = int(arg) if mode == "hang" else None
step = 0
while steps is None or step < steps:
    step += 1
    time.sleep(0.2)
    print(f"[rank {rank}] iter {step} batch_cost 0.2 s", flush=True)
time.sleep(600)
