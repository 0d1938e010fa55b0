"""SGD and data-parallel gradients by hand: what the scripts here train with, instead of ``torch.optim.SGD`` and
``DistributedDataParallel``.

Both of those import ``torch._dynamo`` the first time they are used (``torch._disable_dynamo``, torch 2.x): about
2.2 s of CPU in every process, more than the script's own training, and a test session starts a dozen of these
scripts (one per rank).  The arithmetic is theirs: SGD with momentum and no dampening (the first step's buffer is
the gradient itself), and, on several ranks, every rank starting from rank 0's weights and stepping with the mean
of the ranks' gradients (one gloo all-reduce a step, of all of them at once).
"""
import torch
import torch.distributed as dist


def _world() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class SGD:
    """``torch.optim.SGD(params, lr, momentum)``, and DDP's gradient averaging where a process group is up."""

    def __init__(self, params, lr: float, momentum: float = 0.0):
        self.params = list(params)
        self.lr, self.momentum = lr, momentum
        self.buffers = [None] * len(self.params)
        if _world() > 1:  # as DDP starts: rank 0's weights on every rank
            for param in self.params:
                dist.broadcast(param.data, 0)

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def step(self) -> None:
        with torch.no_grad():
            grads = [param.grad for param in self.params]
            world = _world()
            if world > 1:  # the mean of the ranks' gradients, as DDP's backward leaves it
                flat = torch.cat([grad.reshape(-1) for grad in grads])
                dist.all_reduce(flat)
                flat /= world
                grads = [part.view_as(grad) for part, grad in zip(flat.split([g.numel() for g in grads]), grads)]
            for i, (param, grad) in enumerate(zip(self.params, grads)):
                if self.momentum:
                    if self.buffers[i] is None:
                        self.buffers[i] = grad.clone()
                    else:
                        self.buffers[i].mul_(self.momentum).add_(grad)
                    grad = self.buffers[i]
                param.add_(grad, alpha=-self.lr)
