"""FED-PUB (Baek et al., ICML 2023): personalised subgraph FL by functional embeddings,
with the personalised sums hidden from the server, and the baselines of its Table 1
(FedAvg, FedProx, FedPer, GCFL, Local) on the same client training.

Modules: :mod:`~securefgl.algorithms.fedpub.settings` (``[experiment.fedpub]``),
:mod:`~securefgl.algorithms.fedpub.model` (masked GCN, proxy graph),
:mod:`~securefgl.algorithms.fedpub.parties`, :mod:`~securefgl.algorithms.fedpub.algorithm`.
The long form: securefgl/algorithms/fedpub/README.md."""

from collections.abc import Sequence

from securefgl.algorithms.fedpub.settings import FedPubSettings
from securefgl.config.families import Family, Section


def _classes() -> Sequence[type]:
    from securefgl.algorithms.fedpub.algorithm import (
        GCFL,
        FedPer,
        FedPub,
        PubFedAvg,
        PubFedProx,
        PubLocal,
    )

    return (FedPub, PubFedAvg, PubFedProx, PubLocal, FedPer, GCFL)


FAMILY = Family(
    name="fedpub",
    algorithms=("fed-pub", "fedpub-fedavg", "fedpub-fedprox", "fedpub-local", "fedper", "gcfl"),
    load=_classes,
    section=Section(
        "fedpub", FedPubSettings, "FED-PUB (ICML 2023): functional similarity, secure sums",
        "fedpub-",
    ),  # fmt: skip
)
