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

``cross_sum`` (:mod:`~securefgl.algorithms.fedsage.clients`): the answered gradients reach
client i only as a hosted secure sum relayed by the edge server (one server), optionally
with accounted Gaussian noise (``cross_sum_noise``; ε in the run's privacy report).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from protocols.dp.accounting import PrivacyAccountant
from securefgl.algorithms.common.edge.client import LocalTraining
from securefgl.algorithms.common.edge.runtime import EdgeFGL
from securefgl.algorithms.fedsage.clients import (
    FedSageClient,
    NeighGenState,
    fedsage_client,
    fedsage_server,
)
from securefgl.config import ConfigError
from securefgl.data import ClientGraph
from securefgl.federation import Call, client_party_id
from securefgl.federation.builders import view_payload
from securefgl.federation.hosted_sums import SecureSumDriver, SumSpec
from securefgl.federation.recipes import Recipe, recipe
from securefgl.federation.transcript import STRUCTURE

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

    def server_recipe(
        self, params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int],
        holds: bool, num_classes: int, num_features: int,
    ) -> Recipe:  # fmt: skip
        return recipe(fedsage_server, params=params, stack=stack, neighbours=neighbours,
                      holds_model=holds)  # fmt: skip

    def before_training(self) -> None:
        ids, ex, st = list(self.clients), self.executor, self.config.fedsage
        ex.map(ids, NeighGenState.pretrain)
        with self.federation.channel.transcript.family_scope(STRUCTURE):
            driver = None
            if st.cross_sum is not None:
                if len(self.server_list) != 1:
                    raise ConfigError("fedsage+ cross_sum needs one edge server")
                fed = self.federation
                spec = SumSpec(st.cross_sum, f"securefgl/fedsage+|seed={fed.seed}")
                spec = spec.authenticated(dict(fed.stack.sum_options()))
                driver = SecureSumDriver(ex, fed.channel, spec, ids, self.server_list[0])
                driver.setup()
            self.accountant = None
            if st.cross_sum_noise > 0:
                kind = self.config.protocol.dp_accountant
                self.accountant = PrivacyAccountant(kind, st.cross_delta)
            prepare, finish = NeighGenState.prepare_answers, NeighGenState.finish_answers
            for epoch in range(st.fed_gen_epochs):
                queries = [e for out in ex.map(ids, NeighGenState.query, epoch) for e in out]
                if driver is None:
                    replies = self._deliver(queries, NeighGenState.answer)
                    answers = [e for out in replies for e in out]
                    self._deliver(answers, NeighGenState.step, to=ids)
                    continue
                self._deliver(queries, NeighGenState.receive_queries, to=ids)
                driver.round(epoch, prepare=lambda c, e=epoch: Call.to(c, prepare, e),
                             finish=lambda c, e=epoch: Call.to(c, finish, e))  # fmt: skip
                if self.accountant is not None:
                    self.accountant.step(st.cross_sum_noise, 1.0)  # one sum per receiver
        ex.map(ids, FedSageClient.mend_graph)

    def privacy(self) -> dict[str, Any]:
        out = super().privacy()
        if getattr(self, "accountant", None) is not None:
            adversary = ("client i (node level: one node of one other client; the answering "
                         "clients honest)")  # fmt: skip
            claim = {"epsilon": self.accountant.epsilon(), "delta": self.config.fedsage.cross_delta,
                     "accountant": self.accountant.kind, "adversary": "client i",
                     "mechanism": "Gaussian shares in the cross-client gradient sums",
                     "unit": "one node of one other client, in the gradients answered to "
                             "client i's generator (the answering clients honest)"}  # fmt: skip
            out = {**out, "answers_epsilon": claim["epsilon"], "answers_delta": claim["delta"],
                   "answers_adversary": adversary,
                   "guarantees": [*out.get("guarantees", []), claim]}  # fmt: skip
            if "epsilon" not in out:
                out.update({k: claim[k] for k in ("epsilon", "delta", "accountant", "adversary")})
        return out

    def protection(self) -> dict[str, str]:
        st = self.config.fedsage
        how = "plain" if st.cross_sum is None else f"{st.cross_sum} secure sum over the answerers"
        if st.cross_clip > 0:
            how += f", answers clipped to {st.cross_clip}"
            if st.cross_noise > 0:
                how += f" + Gaussian noise σ = {st.cross_noise}·C (no ε claimed)"
            if st.cross_sum_noise > 0:
                how += f" + Gaussian noise σ = {st.cross_sum_noise}·Δ on the sum (RDP-accounted)"
        return {**super().protection(), CROSS: how}
