"""GPFL (Graph Personalized Federated Learning, TMLR 2025, Algorithm 1) with what the
server sees made private.

Per round: every client trains its GIN one epoch (Adam, state kept) and computes its
features (parameters avg-pooled, functional embedding on shared Erdős–Rényi probes); the
server gets the features (``similarity = plain``, the paper) or only their cosine
similarities (``ckks``: feature means by secure sums, the clients centre and normalise,
the Gram matrices under CKKS with a key authority, :mod:`protocols.gram`); in round 0 the
clients' property vectors arrive (Laplace LDP when ``property_epsilon`` is set) and the
rule-based selector gives A_0; the server updates A_t, trains its GAE, discretises, forms
W and sends each client its row and column of W; every client then gets Σ_j w_ij Δθ_j as a
secure sum addressed to it (:class:`~securefgl.federation.secure_sums.SecureSumDriver`:
``plain``, ``masked``: the server learns nothing of any update, ``ckks``) and sets
θ_i ← θ_i + Σ_j w_ij Δθ_j (Eq. 2). Deviations and the paper/code differences:
securefgl/algorithms/gpfl/README.md.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from torch_geometric.data import Data

from protocols.base import Role, run_phases
from protocols.dp.accounting import PureDPAccountant
from protocols.gram import DEFAULT_AUTHORITY, GramProtocol
from protocols.names import MALICIOUS
from securefgl.algorithms.base import Evaluators
from securefgl.algorithms.common.graph.learner import (
    INITIAL_MODEL,
    GraphAlgorithm,
    GraphLearner,
    build_model,
    deliver,
    send_initial,
)
from securefgl.algorithms.gpfl.parties import (
    GPFLClient,
    GPFLServer,
    gpfl_client,
    gpfl_server,
    gpfl_settings,
    gram_authority,
)
from securefgl.algorithms.gpfl.settings import GPFLSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Call, client_party_id
from securefgl.federation.audit import AggregateAudit
from securefgl.federation.builders import config_json, graph_view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.hosted_sums import SecureSumDriver, SumSpec, weighted_sum_error
from securefgl.federation.recipes import Recipe, recipe
from securefgl.models import get_flat

FEATURES = "client features (parameters, functional embeddings)"
PROPERTIES = "graph properties (round 0)"
UPDATES = "personalised aggregation Σ_j w_ij Δθ_j"
WEIGHTS = "mixing weights (server -> clients)"


log = logging.getLogger(__name__)

class GPFL(GraphAlgorithm):
    name = "gpfl"
    all_clients = True
    own_privacy = "[experiment.gpfl]"

    @classmethod
    def check_stack(cls, config: ExperimentConfig) -> None:
        """Refuse settings whose protection would not hold: a stack that plain sums would
        not apply, CKKS similarities whose feature means would travel in the clear, the Gram
        protocol against a malicious server, sums over fewer than ``min_senders`` others."""
        super().check_stack(config)
        protocol, s = config.protocol, gpfl_settings(config)
        if s.sums == "plain" and protocol.transport != "plain":
            raise ConfigError(
                f"gpfl: with sums = plain every update goes to the server in the clear, so "
                f"--protocol {protocol.label} would not be applied: use --protocol plain, or "
                "--gpfl-sums masked / ckks"
            )
        if s.sums == "plain" and s.similarity == "ckks":
            raise ConfigError(
                "gpfl: similarity = ckks centres the features by a mean taken with the "
                "personalised sums, and sums = plain would send every client's features to "
                "the server in the clear: use --gpfl-sums masked / ckks, or similarity plain"
            )
        if s.similarity == "ckks" and protocol.threat_model == MALICIOUS:
            raise ConfigError(
                "gpfl: the CKKS similarities (Gram protocol) have no defence against a "
                "malicious server, which could have the key authority decrypt any product of "
                "the clients' ciphertexts and read their features: run it honest-but-curious, "
                "or with --gpfl-similarity plain (the features to the server in the clear)"
            )
        if s.property_epsilon is not None and s.initial != "property":
            raise ConfigError(
                "gpfl: property_epsilon protects the graph-property release, which initial = "
                f"{s.initial} does not make (use initial = property, or unset the ε)"
            )
        if s.sums != "plain" and config.clients - 1 < s.min_senders:
            raise ConfigError(
                f"gpfl: a personalised sum needs min_senders = {s.min_senders} other clients, "
                f"and {config.clients} clients leave {config.clients - 1} (lower "
                "--gpfl-min-senders or add clients)"
            )

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        self.s = s = gpfl_settings(cfg)
        if s.sums == "plain" and s.min_senders != GPFLSettings().min_senders:
            log.warning("gpfl: min_senders = %d has no effect with sums = plain (the server "
                        "mixes every update itself)", s.min_senders)  # fmt: skip
        views: list[GraphClientView] = federation.views  # type: ignore[assignment]
        if len(views) < 3:
            raise ConfigError("gpfl needs at least 3 clients")
        self.federation, self.ids = federation, [client_party_id(v.client_id) for v in views]
        init = build_model("gin", views[0].num_features, views[0].num_classes, cfg)
        config = config_json(cfg)
        recipes: dict[str, Recipe] = {
            SERVER: recipe(gpfl_server, params=get_flat(init), clients=self.ids, config=config,
                           seed=federation.seed),
            **{pid: recipe(gpfl_client, view=graph_view_payload(v), config=config,
                           seed=federation.seed, noise_seed=federation.noise_seed)
               for pid, v in zip(self.ids, views, strict=True)},
        }  # fmt: skip
        authority = s.similarity == "ckks"
        if authority:
            recipes[DEFAULT_AUTHORITY] = recipe(
                gram_authority, party_id=DEFAULT_AUTHORITY, server_id=SERVER, clients=self.ids
            )
        self.executor = ex = federation.make_executor(recipes)
        self.clients = {pid: ex.held(pid) for pid in self.ids}
        self.audit = AggregateAudit()
        self.server = ex.held(SERVER)
        self._gram_hosted = False
        channel = federation.channel
        send_initial(ex, channel, self.ids)
        experiment = f"{cfg.name or 'run'}|gpfl|seed={federation.seed}"
        options = {"min_senders": s.min_senders if s.sums != "plain" else 1}
        spec = SumSpec(str(s.sums), experiment, options)
        self.spec = spec = spec.authenticated(federation.stack.sum_options())
        self.driver = SecureSumDriver(ex, channel, spec, self.ids, SERVER)
        self.driver.setup()
        self.gram_roles = {Role.SERVER: [SERVER], Role.CLIENT: self.ids,
                           Role.AUTHORITY: [DEFAULT_AUTHORITY] if authority else []}  # fmt: skip
        self.accountant = PureDPAccountant()
        self._weights = np.array(ex.map(self.ids, GraphLearner.training_weight))

    def _host_gram(self) -> None:
        """First round: the feature sizes are known; the Gram protocol's keys (ckks)."""
        ex = self.executor
        dims = ex.call([Call.to(self.ids[0], GPFLClient.feature_dims)])[0]
        auth = DEFAULT_AUTHORITY if self.s.similarity == "ckks" else None
        ex.call([Call.to(c, GPFLClient.host_gram, SERVER, dims, "ckks") for c in self.ids])
        ex.call([Call.to(SERVER, GPFLServer.host_gram, self.ids, dims, "ckks", auth)])
        run_phases(GramProtocol.setup_phases, self.gram_roles, ex.phases(GramProtocol),
                   self.federation.channel.transmit)  # fmt: skip
        self._gram_hosted = True

    def train_round(self, round_idx: int) -> float:
        ex, channel, s, t = self.executor, self.federation.channel, self.s, round_idx
        channel.round = t
        losses = ex.map(self.ids, GPFLClient.local_round, t)
        if s.similarity == "plain":
            sent = [env for out in ex.map(self.ids, GPFLClient.send_features, t) for env in out]
            ex.call([Call.to(SERVER, GPFLServer.receive_features, t, channel.transmit(sent))])
        else:
            if not self._gram_hosted:
                self._host_gram()
            k, ids = len(self.ids), self.ids
            self.driver.round(
                2 * t,
                prepare=lambda c: Call.to(c, GPFLClient.prepare_mean, [o for o in ids if o != c]),
                finish=lambda c: Call.to(c, GPFLClient.finish_mean, t, k),
            )
            ex.call([Call.to(SERVER, GPFLServer.begin_gram, t)])
            run_phases(
                GramProtocol.round_phases, self.gram_roles, ex.phases(GramProtocol),
                channel.transmit,
            )  # fmt: skip
        if t == 0 and s.initial == "property":
            sent = [env for out in ex.map(self.ids, GPFLClient.send_properties, t) for env in out]
            ex.call([Call.to(SERVER, GPFLServer.receive_properties, t, channel.transmit(sent))])
            if s.property_epsilon is not None:
                self.accountant.step(s.property_epsilon)  # one release per client
        plain = s.sums == "plain"
        sent = ex.call([Call.to(SERVER, GPFLServer.build_network, t, self._min_senders, not plain)])
        if plain:  # the paper: updates to the server, which mixes them (O(k) messages)
            ups = [env for out in ex.map(self.ids, GPFLClient.send_update, t) for env in out]
            mixed = ex.call([Call.to(SERVER, GPFLServer.mix, t, channel.transmit(ups))])[0]
            deliver(ex, channel, mixed, GPFLClient.apply_mixture, t)
        else:
            deliver(ex, channel, sent[0], GPFLClient.receive_weights, t)
            self.driver.round(
                2 * t + 1,
                prepare=lambda c: Call.to(c, GPFLClient.prepare_update, t),
                finish=lambda c: Call.to(c, GPFLClient.finish_update, t),
            )
            self.audit.record(weighted_sum_error(
                {c: p.sums if p is not None else None for c, p in self.clients.items()}))
        return float(np.average(losses, weights=self._weights))

    @property
    def _min_senders(self) -> int:
        return self.s.min_senders if self.s.sums != "plain" else 1

    def evaluators(self) -> Evaluators:
        return Evaluators(self.ids, GraphLearner.predict)

    def privacy(self) -> dict[str, Any]:
        if self.s.property_epsilon is None:
            return {}
        claim = {
            "epsilon": self.accountant.epsilon(),
            "delta": 0.0,
            "adversary": "everyone (local DP on the graph-property release only)",
            "accountant": self.accountant.kind,
            "unit": f"graph properties ({self.s.property_unit}; local DP)",
        }
        return {**claim, "property_unit": self.s.property_unit, "guarantees": [claim]}

    def protection(self) -> dict[str, str]:
        s = self.s
        if s.similarity == "plain":
            features = "plain (the server receives every client's features)"
        else:
            features = (f"means by {s.sums} sums; cosine similarities under CKKS with a key "
                        "authority (the server gets only the k×k matrices)")  # fmt: skip
        if s.initial != "property":
            props = "not sent (random initial network)"
        elif s.property_epsilon is None:
            props = "plain"
        else:
            props = f"Laplace LDP, ε = {s.property_epsilon:g} per client ({s.property_unit})"
        return {
            INITIAL_MODEL: "plain",
            FEATURES: features,
            PROPERTIES: props,
            UPDATES: "plain (each update to the server, which mixes)" if s.sums == "plain"
            else f"{s.sums} secure sums to each receiver",
            WEIGHTS: "kept by the server" if s.sums == "plain"
            else "plain (each client learns its row and column)",
        }

    def model_label(self) -> str:
        return "GIN (personalised per client)"
