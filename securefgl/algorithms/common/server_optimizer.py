"""The global-model update of FedOpt (Reddi et al. 2021, "Adaptive Federated Optimization").

The aggregated client delta is treated as a pseudo-gradient ``-mean_delta`` and applied by
an optimizer over the flat parameter vector. With one local SGD step of learning rate 1,
the delta is minus the client gradient and this is FedSGD with a server-side Adam: the
"FedSGD GNN" baseline of FedStruct, whose code keeps an identical Adam state at each party.
Whoever holds the model applies it: the server, or every client when the protocol hides
the aggregate from the server (CKKS); identical inputs keep the copies identical.
"""

from __future__ import annotations

import numpy as np
import torch

SERVER_OPTIMIZERS = ("adam", "sgd")


class GlobalOptimizer:
    def __init__(self, params: np.ndarray, kind: str, lr: float, weight_decay: float) -> None:
        if kind not in SERVER_OPTIMIZERS:
            raise ValueError(f"unknown server optimizer {kind!r}; choose from {SERVER_OPTIMIZERS}")
        self.param = torch.nn.Parameter(torch.as_tensor(params, dtype=torch.float32).clone())
        make = torch.optim.Adam if kind == "adam" else torch.optim.SGD
        self.opt = make([self.param], lr=lr, weight_decay=weight_decay)

    def step(self, mean_delta: np.ndarray) -> np.ndarray:
        """Apply one aggregated delta; returns the new parameters."""
        self.param.grad = -torch.as_tensor(mean_delta, dtype=torch.float32)
        self.opt.step()
        return self.params

    @property
    def params(self) -> np.ndarray:
        return self.param.detach().numpy().copy()
