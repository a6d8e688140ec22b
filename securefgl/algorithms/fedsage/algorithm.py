"""FedSage and FedSage+ (Zhang et al., NeurIPS 2021, §3.2-3.4) on the edge runtime.

* ``fedsage``: GraphSAGE (Eq. 3's self ‖ mean-of-neighbours, 2 layers) trained by uniform
  FedAvg over the clients' subgraphs, one server (``edge-0``);
* ``fedsage+``: before the first round (set-up traffic, round −1), every client trains its
  NeighGen on its impaired graph (LocSage+), then ``fed_gen_epochs`` federated epochs of fGen
  with the cross-client loss computed by the other clients through the channel
  (:mod:`~securefgl.algorithms.fedsage.clients`); each client then mends its full subgraph with its
  own generated neighbours and FedSage runs on the mended graphs.

The classifier's rounds are the edge runtime's
(:class:`~securefgl.algorithms.common.edge.runtime.EdgeFGL`
with one server, the configured protocol stack, ``local_steps`` Adam steps per round, mean
cross-entropy). Deviations: full-batch local steps (the official code uses mini-batches of
32 with neighbour sampling [5, 5]); NeighGen is not averaged across clients (as in the
official code: a personal generator per client).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

from securefgl.algorithms.common.edge.client import LocalTraining
from securefgl.algorithms.common.edge.runtime import EdgeFGL
from securefgl.algorithms.fedsage.clients import FedSageClient, NeighGenState, fedsage_client
from securefgl.data import ClientGraph
from securefgl.federation import client_party_id
from securefgl.federation.builders import view_payload
from securefgl.federation.recipes import Recipe, recipe

CROSS = "fGen queries and answered gradients (client <-> client)"


class FedSage(EdgeFGL):
    name = "fedsage"
    generator: ClassVar[bool] = False

    def training(self) -> LocalTraining:
        cfg, st = self.config, self.config.fedsage
        return LocalTraining(st.local_steps, "sage", 0.0, "mean", cfg.hidden, cfg.dropout,
                             cfg.lr, cfg.weight_decay)  # fmt: skip

    def client_recipe(
        self, view: ClientGraph, stack: dict[str, Any], train: LocalTraining
    ) -> Recipe:
        fed = self.federation
        peers = None
        if self.generator:
            peers = [client_party_id(v.client_id) for v in fed.views if v is not view]
        return recipe(
            fedsage_client, view=view_payload(view), stack=stack, training=asdict(train),
            peers=peers, noise_seed=fed.noise_seed, seed=fed.seed,
        )  # fmt: skip

    def model_label(self) -> str:
        return "GraphSAGE (2 layers)" + (" on the mended subgraph" if self.generator else "")


class FedSagePlus(FedSage):
    name = "fedsage+"
    generator = True
    repairs_cross_edges = True

    def before_training(self) -> None:
        ids, ex = list(self.clients), self.executor
        ex.map(ids, NeighGenState.pretrain)
        for epoch in range(self.config.fedsage.fed_gen_epochs):
            queries = [e for out in ex.map(ids, NeighGenState.query, epoch) for e in out]
            answers = [e for out in self._deliver(queries, NeighGenState.answer) for e in out]
            self._deliver(answers, NeighGenState.step, to=ids)
        ex.map(ids, FedSageClient.mend_graph)

    def protection(self) -> dict[str, str]:
        st = self.config.fedsage
        how = "plain"
        if st.cross_clip > 0:
            how += f", answers clipped to {st.cross_clip}"
            if st.cross_noise > 0:
                how += f" + Gaussian noise σ = {st.cross_noise}·C (no ε claimed)"
        return {**super().protection(), CROSS: how}
