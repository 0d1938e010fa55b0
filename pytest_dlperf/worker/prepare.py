"""What every kind of run sets up first, on each rank: its rank, the registered model, the model's
settings and the device.  Shared by a throughput run (:func:`pytest_dlperf.worker.main.run`) and
a convergence run (:mod:`pytest_dlperf.worker.convergence`)."""

from __future__ import annotations

from ..protocol import ModelSource, WorkerResult, WorkerSpec


def _device(kind: str, local_rank: int, share: bool = False):
    import torch

    from ..environment import cpu_model
    from .distributed import shared_index

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available in the worker")
        index = shared_index(local_rank, torch.cuda.device_count()) if share else local_rank
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
        return device, {"type": "cuda", "name": torch.cuda.get_device_name(device), "index": index}
    # The intra-op threads this process trains with: OMP_NUM_THREADS as it started (dlperf_cpu_threads).
    return torch.device("cpu"), {"type": "cpu", "name": cpu_model(), "index": None,
                                 "intra_op_threads": torch.get_num_threads()}


def prepare(spec: WorkerSpec, result: WorkerResult):
    """This rank, the registered model, its settings and the device: ``(ranks, model_spec, settings,
    device, device_info)``; fills ``result.device``, ``result.settings`` and ``result.unit``."""
    from ..models import ensure_registered
    from .distributed import ranks_from_env
    from .training import compile_settings, uses_channels_last

    ranks = ranks_from_env()
    case = spec.case
    registered_in = spec.model_source or ModelSource()
    model_spec = ensure_registered(case.model, registered_in.file, registered_in.module)
    settings = model_spec.settings(case.settings_dict)
    device, device_info = _device(spec.device, ranks.local_rank, spec.share_gpus)
    result.device = device_info
    settings["channels_last"] = uses_channels_last(model_spec, case.precision, settings)
    settings.update(compile_settings(model_spec, case.settings_dict, device_info.get("type", "cpu")))
    result.settings, result.unit = settings, model_spec.unit
    return ranks, model_spec, settings, device, device_info
