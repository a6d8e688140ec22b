"""FED-PUB (Baek et al., ICML 2023, Algorithm 1) with the server blind to every model, and
the baselines of its Table 1 trained the same way.

Per round: every client loads its personalised model θ̄_i of the last round (masks stay
local), takes one full-batch Adam step, and sends h̃_i (its mean embedding of the public
proxy graph; plain or clipped + Gaussian noise, accounted); the server forms
α = row-softmax(τ·cos(h̃_i, h̃_j)) (Eq. 3-4) and θ̄_i = Σ_j α_ij θ_j (Eq. 5) reaches client
i either by the server mixing the plain θ_j (``sums = "plain"``, the paper) or as a secure
sum addressed to i (``masked``: pairwise masks; ``ckks``: under i's CKKS key), the server
learning only α. The baselines share the client: FedAvg (uniform mean; the authors'
code weights by node counts), FedProx, FedPer (classifier local), GCFL (cluster means of
updates), Local.
Deviations and the channel: securefgl/algorithms/fedpub/README.md.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from protocols.dp.accounting import PrivacyAccountant
from securefgl.algorithms.base import Algorithm, Evaluators
from securefgl.algorithms.common.graph.learner import deliver
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.fedpub.model import MaskedGCN
from securefgl.algorithms.fedpub.parties import (
    PubClient,
    PubServer,
    _flat,
    make_proxy,
    pub_client,
    pub_server,
)
from securefgl.algorithms.fedpub.settings import FedPubSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.audit import AggregateAudit
from securefgl.federation.builders import config_json, view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.hosted_sums import SecureSumDriver, SumSpec, weighted_sum_error
from securefgl.federation.recipes import recipe

INITIAL = "initial model and proxy graph (server -> clients)"
EMBEDDINGS = "functional embeddings h̃_i (clients -> server)"
MODELS = "personalised aggregation θ̄_i = Σ_j α_ij θ_j"
WEIGHTS = "mixing weights α (server -> clients)"
SIZES = "training-node counts (clients -> server)"


class PersonalisedSubgraphFL(Algorithm):
    """The round loop shared by FED-PUB and its baselines (``variant``)."""

    variant: ClassVar[str] = "fed-pub"
    all_clients = True
    own_privacy = "[experiment.fedpub]"
    instead_of = {
        "model": "its model is FED-PUB's GCN", "layers": "its model is FED-PUB's GCN",
        "hidden": "see --fedpub-hidden", "lr": "see --fedpub-lr", "client_lr": "see --fedpub-lr",
        "weight_decay": "see --fedpub-weight-decay", "local_epochs": "see --fedpub-local-steps",
        "mu": "see --fedpub-mu", "server_optimizer": "its server mixes personalised means",
    }  # fmt: skip

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        super().check_stack(config)
        protocol = config.protocol
        s = config.section(FedPubSettings).resolved(protocol.secure_sum_mode())
        if cls.variant != "fed-pub" and s.sums != "plain":
            raise ConfigError(f"{cls.name}: secure personalised sums are FED-PUB's; the "
                              "baselines aggregate in the clear (use sums = plain and "
                              "--protocol plain)")  # fmt: skip
        if s.sums == "plain" and protocol.transport != "plain" and cls.variant != "local":
            raise ConfigError(
                f"{cls.name}: with sums = plain every θ_j goes to the server in the clear, so "
                f"--protocol {protocol.label} would not be applied: use --protocol plain, or "
                "--fedpub-sums masked / ckks (FED-PUB only)"
            )
        if cls.variant == "fed-pub" and s.embedding == "gaussian" and s.sums == "plain":
            raise ConfigError(
                "fed-pub: embedding = gaussian hides h̃_i from the server, but with sums = "
                "plain the server receives every θ_j and recomputes h̃_j on the proxy graph it "
                "made: use --fedpub-sums masked or ckks (or --protocol secagg / ckks)"
            )
        if cls.variant == "fed-pub" and s.sums != "plain" and config.clients - 1 < s.min_senders:
            raise ConfigError(
                f"fed-pub: a secure sum to one client needs min_senders = {s.min_senders} other "
                f"clients, and {config.clients} clients leave {config.clients - 1}: every "
                "client would keep its own model (lower --fedpub-min-senders or add clients)"
            )

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        s = cfg.section(FedPubSettings).resolved(cfg.protocol.secure_sum_mode())
        self.s, self.federation = s, federation
        views = federation.views
        if len(views) < 2:
            raise ConfigError(f"{self.name} needs at least 2 clients")
        self.ids = ids = [client_party_id(v.client_id) for v in views]
        v0 = views[0]
        with party_torch_rng(federation.seed, SERVER, "fedpub-init"):
            init = MaskedGCN(v0.num_features, s.hidden, v0.num_classes, cfg.dropout)
        params = _flat(init, init.shared_names())
        proxy_x, proxy_ei = make_proxy(s, v0.num_features, federation.seed)
        config = config_json(cfg)
        recipes = {
            SERVER: recipe(pub_server, params=params, proxy_x=proxy_x, proxy_edges=proxy_ei,
                           clients=ids, config=config, variant=self.variant),
            **{pid: recipe(pub_client, view=view_payload(v), config=config,
                           variant=self.variant, seed=federation.seed,
                           noise_seed=federation.noise_seed)
               for pid, v in zip(ids, views, strict=True)},
        }  # fmt: skip
        self.executor = ex = federation.make_executor(recipes)
        self.clients = {pid: ex.held(pid) for pid in ids}
        self.audit = AggregateAudit()
        self.server = ex.held(SERVER)
        channel = federation.channel
        channel.round = -1
        self._weights = np.asarray(ex.map(ids, PubClient.training_weight))  # the loss's mean
        if self.variant == "gcfl":  # its server weighs by training-node counts
            sent = [env for out in ex.map(ids, PubClient.send_size) for env in out]
            ex.call([Call.to(SERVER, PubServer.receive_sizes, channel.transmit(sent))])
        sent = ex.call([Call.to(SERVER, PubServer.broadcast_initial, ids)])[0]
        deliver(ex, channel, sent, PubClient.receive_initial)
        self.driver: SecureSumDriver | None = None
        if s.sums != "plain":
            experiment = f"{cfg.name or 'run'}|fed-pub|seed={federation.seed}"
            spec = SumSpec(str(s.sums), experiment, {"min_senders": s.min_senders})
            spec = spec.authenticated(federation.stack.sum_options())
            self.driver = SecureSumDriver(ex, channel, spec, ids, SERVER)
            self.driver.setup()
        kind = cfg.protocol.dp_accountant
        self.accountant = PrivacyAccountant(kind, s.delta) if s.embedding == "gaussian" else None

    def train_round(self, round_idx: int) -> float:
        ex, channel, s, t = self.executor, self.federation.channel, self.s, round_idx
        channel.round = t
        mu = s.mu if self.variant == "fedprox" else 0.0
        losses = ex.map(self.ids, PubClient.local_round, t, mu)
        if self.variant == "local":
            return float(np.average(losses, weights=self._weights))
        if self.variant == "fed-pub":
            sent = [env for out in ex.map(self.ids, PubClient.embedding, t) for env in out]
            ex.call([Call.to(SERVER, PubServer.receive_embeddings, t, channel.transmit(sent))])
            if self.accountant is not None:
                self.accountant.step(s.embedding_noise, 1.0)  # one release per client
        if s.sums == "plain":
            ups = [env for out in ex.map(self.ids, PubClient.send_model, t) for env in out]
            mixed = ex.call([Call.to(SERVER, PubServer.mix, t, channel.transmit(ups))])[0]
            deliver(ex, channel, mixed, PubClient.receive_mix, t)
        else:
            assert self.driver is not None
            sent = ex.call([Call.to(SERVER, PubServer.send_weights, t, s.min_senders)])[0]
            deliver(ex, channel, sent, PubClient.receive_weights, t)
            self.driver.round(t, prepare=lambda c: Call.to(c, PubClient.prepare_sum, t),
                              finish=lambda c: Call.to(c, PubClient.finish_sum, t))  # fmt: skip
            self.audit.record(weighted_sum_error(
                {c: p.sums if p is not None else None for c, p in self.clients.items()}))
        return float(np.average(losses, weights=self._weights))

    def evaluators(self) -> Evaluators:
        return Evaluators(self.ids, PubClient.predict)

    def privacy(self) -> dict[str, Any]:
        if self.variant != "fed-pub" or self.accountant is None:
            return {}
        eps, kind = self.accountant.epsilon(), self.accountant.kind
        claim = {"epsilon": eps, "delta": self.s.delta, "accountant": kind, "adversary": "server",
                 "mechanism": "Gaussian on the functional embeddings",
                 "unit": "one client's functional embeddings h̃_i over the run (client-level); "
                         "its models travel by secure sums, α is not noised"}  # fmt: skip
        return {**{k: claim[k] for k in ("epsilon", "delta", "accountant", "adversary")},
                "embedding_epsilon": eps, "embedding_delta": self.s.delta,
                "guarantees": [claim]}

    def protection(self) -> dict[str, str]:
        s = self.s
        out = {INITIAL: "plain (public)"}
        if self.variant == "local":
            return out
        if self.variant == "fed-pub":
            out[EMBEDDINGS] = ("plain" if s.embedding == "plain" else
                               f"clipped to {s.embedding_clip:g}, Gaussian σ = "
                               f"{s.embedding_noise:g} (client-level, RDP-accounted)")  # fmt: skip
        out[MODELS] = ("plain (every θ_j to the server, which mixes)" if s.sums == "plain"
                       else f"{s.sums} secure sums addressed to each client")  # fmt: skip
        if s.sums != "plain":
            out[WEIGHTS] = "plain (each client learns its row and column of α)"
        if self.variant == "gcfl":
            out[SIZES] = "plain (GCFL's weights inside a cluster)"
        return out

    def model_label(self) -> str:
        return "masked GCN" if self.variant == "fed-pub" and self.s.masks else "GCN"

    def local_work(self) -> str:
        n = self.config.section(FedPubSettings).local_steps
        return f"{n} full-batch step{'s' * (n != 1)}"


class FedPub(PersonalisedSubgraphFL):
    name = "fed-pub"
    variant = "fed-pub"


class PubFedAvg(PersonalisedSubgraphFL):
    """FedAvg on FED-PUB's client training: uniform mean of the client models (the
    repository's server weights by node counts, near-equal under METIS), Adam state kept on
    every client."""

    name = "fedpub-fedavg"
    variant = "fedavg"


class PubFedProx(PersonalisedSubgraphFL):
    name = "fedpub-fedprox"
    variant = "fedprox"


class PubLocal(PersonalisedSubgraphFL):
    name = "fedpub-local"
    variant = "local"
    setting = "local"


class FedPer(PersonalisedSubgraphFL):
    """FedPer (Arivazhagan et al. 2019): the GCN layers averaged, the classifier local."""

    name = "fedper"
    variant = "fedper"


class GCFL(PersonalisedSubgraphFL):
    """GCFL (Xie et al., NeurIPS 2021): clusters of clients by their updates' cosines."""

    name = "gcfl"
    variant = "gcfl"
