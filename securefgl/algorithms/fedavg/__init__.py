"""The baselines every family builds on: FedAvg (McMahan et al. 2017), FedProx (Li et al.
2020), each client alone (``local``) and the non-federated upper bound (``central``).

Modules: ``parties`` / ``algorithm`` (FedAvg's round loop, which other families extend),
``local``, ``central``.
"""

from collections.abc import Sequence

from securefgl.config.families import Family


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedavg.algorithm import FedAvg, FedProx
    from securefgl.algorithms.fedavg.central import Central
    from securefgl.algorithms.fedavg.local import Local

    return (FedAvg, FedProx, Local, Central)


FAMILY = Family(
    name="fedavg",
    algorithms=("fedavg", "fedprox", "local", "central"),
    load=_classes,
    defaults=("fedavg", "local", "central"),
)
