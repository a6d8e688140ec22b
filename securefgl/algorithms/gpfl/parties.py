"""GPFL's parties: the clients (local training, features, their side of the sums and the Gram
protocol) and the server (the client network). Algorithm:
:mod:`securefgl.algorithms.gpfl.algorithm`.

A client holds only its graphs, its personalised GIN and what it is sent: the initial
model, the feature mean (secure sums), its row and column of W and its personalised sum.
The server holds what reaches it: features or only their cosine similarities, the property
vectors (LDP-noised when configured) and the blocks of plain sums (masked / ckks: nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from protocols.base import Envelope
from protocols.dp.rng import make_rng
from protocols.gram import GRAM_PARAMS, GramAuthority, GramClient, GramProtocol, GramServer
from protocols.secure_sum import SumRequest
from protocols.wire import Payload
from securefgl.algorithms.common.graph.learner import GraphLearner, InitServer
from securefgl.algorithms.common.training import party_torch_rng
from securefgl.algorithms.gpfl.network import (
    compress,
    learn_network,
    marginal_unit,
    mixing_matrix,
    normalize,
    probe_graphs,
    spectral_factor,
    unit,
    update_network,
)
from securefgl.algorithms.gpfl.properties import (
    client_properties,
    ldp_release,
    property_rows,
    rule_selector,
)
from securefgl.algorithms.gpfl.settings import GPFLSettings
from securefgl.config import ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Party, ProtocolHost
from securefgl.federation.builders import config_from_json, graph_view_from_payload
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.recipes import party_builder

TAG_FEATURES = "gpfl/features"
TAG_PROPERTIES = "gpfl/properties"
TAG_WEIGHTS = "gpfl/weights"
TAG_UPDATE = "gpfl/update"
TAG_MIXTURE = "gpfl/mixture"


class GPFLClient(GraphLearner, Party):
    """A GPFL client: its GIN, its similarity features, its hosted secure sums and its side
    of the Gram protocol."""

    def __init__(self, view: GraphClientView, config: ExperimentConfig, settings: GPFLSettings,
                 seed: int, noise_seed: int | None) -> None:  # fmt: skip
        self.init_learner(view, config, "gin", seed)
        self.train_graphs = view.dataset(view.train_mask)  # for the property vector
        self.settings_gpfl = settings
        x, ei, batch = probe_graphs(settings.probes, settings.probe_nodes, settings.probe_p,
                                    view.num_features, 0, settings.identical_probes)  # fmt: skip
        self.probes = (torch.from_numpy(x), torch.from_numpy(ei), torch.from_numpy(batch))
        self.noise = make_rng(noise_seed, "gpfl-property-ldp", self.party_id)
        self.sums = HostedSum(self.party_id)
        self.gram: GramClient | None = None
        self.start: np.ndarray | None = None
        self.delta: np.ndarray | None = None
        self.features: dict[str, np.ndarray] = {}
        self.row: dict[str, float] = {}  # senders of my sum and their weights (+ my own)
        self.column: dict[str, float] = {}  # receivers of my update and my weight there

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles(), self.gram)

    # -- local training and features ------------------------------------------------------
    def local_round(self, round_idx: int) -> float:
        self.start = self.flat
        loss = self.train_local(round_idx)
        trained = self.flat
        self.delta = trained.astype(np.float64) - self.start
        self.model.eval()
        with torch.no_grad():
            x, ei, batch = self.probes
            out = self.model(x, ei, batch, self.settings_gpfl.probes)
        self.features = {
            "params": compress(trained.astype(np.float64), self.settings_gpfl.compress_dim),
            "embedding": out.numpy().astype(np.float64).reshape(-1),
        }
        return loss

    def feature_dims(self) -> dict[str, int]:
        return {k: int(v.size) for k, v in self.features.items()}

    def send_features(self, round_idx: int) -> list[Envelope]:
        """Plain similarity: the features themselves to the server (the paper's setting)."""
        payload = Payload(dict(self.features), {"round": round_idx})
        return [Envelope(self.party_id, SERVER, TAG_FEATURES, payload)]

    def send_properties(self, round_idx: int) -> list[Envelope]:
        """p_C over the training graphs, through Laplace LDP when ``property_epsilon`` is set."""
        s = self.settings_gpfl
        if s.property_epsilon is None:
            props = client_properties(self.train_graphs)
        else:
            props = ldp_release(property_rows(self.train_graphs), s.property_epsilon,
                                s.property_unit, self.noise)  # fmt: skip
        return [Envelope(self.party_id, SERVER, TAG_PROPERTIES,
                         Payload({"properties": props}, {"round": round_idx}))]  # fmt: skip

    # -- secure sums ----------------------------------------------------------------------
    def host_gram(self, server_id: str, dims: dict[str, int], mode: str) -> None:
        self.gram = GramClient(self.party_id, server_id, dims, mode)

    def prepare_mean(self, others: list[str]) -> int:
        """Send my features to every other client's sum; ask for the sum of theirs."""
        vec = np.concatenate([self.features["params"], self.features["embedding"]])
        for other in others:
            self.sums.client.add_contribution(other, vec)
        self.sums.client.expect_sum(SumRequest(tuple(others), vec.shape), local=vec)
        return len(others)

    def finish_mean(self, round_idx: int, clients: int) -> None:
        """Centre and normalise my features with the mean; hand them to the Gram protocol."""
        assert self.gram is not None
        result = self.sums.client.result()
        assert result is not None
        mean = np.asarray(result.total) / clients
        n = self.features["params"].size
        self.gram.begin_round(round_idx, {
            "params": unit(self.features["params"] - mean[:n]),
            "embedding": unit(self.features["embedding"] - mean[n:]),
        })  # fmt: skip

    def receive_weights(self, round_idx: int, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_WEIGHTS:
                meta = env.payload.meta
                self.row = dict(zip(meta["senders"], env.payload.array("row").tolist(),
                                    strict=True))  # fmt: skip
                self.column = dict(zip(meta["receivers"], env.payload.array("column").tolist(),
                                       strict=True))  # fmt: skip

    def send_update(self, round_idx: int) -> list[Envelope]:
        """Plain aggregation (the paper): Δθ_i to the server, which mixes."""
        payload = Payload({"delta": self.delta}, {"round": round_idx})
        return [Envelope(self.party_id, SERVER, TAG_UPDATE, payload)]

    def apply_mixture(self, round_idx: int, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == TAG_MIXTURE and self.start is not None:
                self.load_flat(self.start + env.payload.array("mix"))

    def prepare_update(self, round_idx: int) -> int:
        """Contribute w_ij Δθ_j to each receiver i; request Σ_j w_ij Δθ_j (own term local)."""
        assert self.delta is not None
        return self.sums.weighted_sum(self.row, self.column, self.delta)

    def finish_update(self, round_idx: int) -> None:
        """θ_i ← θ_i + Σ_j w_ij Δθ_j (Eq. 2 with φ the identity and AGGR a weighted sum)."""
        assert self.start is not None and self.delta is not None
        senders = [s for s in self.row if s != self.party_id]
        if senders:
            result = self.sums.client.result()
            assert result is not None
            mix = np.asarray(result.total)
        else:
            mix = self.row.get(self.party_id, 1.0) * self.delta
        self.load_flat(self.start + mix)


class GPFLServer(InitServer):
    """Learns the client network from what reaches it and sends each client its weights."""

    def __init__(self, params: np.ndarray, clients: list[str], settings: GPFLSettings,
                 seed: int) -> None:  # fmt: skip
        super().__init__(params)
        self.clients, self.s = list(clients), settings
        self.rng = np.random.default_rng([seed, 7])  # the random initial network (ablation)
        self.seed = seed
        self.sums = HostedSum(self.party_id)
        self.gram: GramServer | None = None
        self.features: dict[str, dict[str, np.ndarray]] = {}
        self.properties: np.ndarray | None = None
        self.previous: np.ndarray | None = None
        self.W: np.ndarray | None = None
        self.kept: list[int] = []
        self.fallbacks = 0  # rows whose few remote senders were folded into the own weight
        self.density: list[float] = []

    def roles(self) -> Iterable[object | None]:
        return (self, *self.sums.roles(), self.gram)

    def host_gram(self, client_ids: list[str], dims: dict[str, int], mode: str,
                  authority: str | None) -> None:  # fmt: skip
        self.gram = GramServer(self.party_id, client_ids, dims, mode, authority, GRAM_PARAMS)

    def begin_gram(self, round_idx: int) -> None:
        assert self.gram is not None
        self.gram.begin_round(round_idx)

    def receive_features(self, round_idx: int, inbox: list[Envelope]) -> None:
        self.features = {env.sender: env.payload.fields for env in inbox
                         if env.tag == TAG_FEATURES}  # fmt: skip

    def receive_properties(self, round_idx: int, inbox: list[Envelope]) -> None:
        got = {env.sender: env.payload.array("properties") for env in inbox}
        self.properties = np.stack([got[c] for c in self.clients])

    def _similarities(self) -> tuple[np.ndarray, np.ndarray]:
        """(GAE input X, A_E): from the features (plain) or the Gram matrices (ckks)."""
        if self.features:
            p = marginal_unit(np.stack([self.features[c]["params"] for c in self.clients]))
            e = marginal_unit(np.stack([self.features[c]["embedding"] for c in self.clients]))
            return p, e @ e.T
        assert self.gram is not None
        grams = self.gram.result()
        assert grams is not None
        return spectral_factor(grams["params"], self.gram.dims["params"]), grams["embedding"]

    def mix(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        """Plain aggregation: every client's Σ_j w_ij Δθ_j from the updates it received."""
        assert self.W is not None
        got = {env.sender: env.payload.array("delta") for env in inbox if env.tag == TAG_UPDATE}
        deltas = np.stack([got[c] for c in self.clients])
        mixed = self.W @ deltas
        return [Envelope(SERVER, c, TAG_MIXTURE, Payload({"mix": mixed[i]}, {"round": round_idx}))
                for i, c in enumerate(self.clients)]  # fmt: skip

    def build_network(self, round_idx: int, min_senders: int, send: bool = True) -> list[Envelope]:
        s, k = self.s, len(self.clients)
        x, a_e = self._similarities()
        if self.previous is None:
            if s.initial == "property":
                assert self.properties is not None, "the property vectors must arrive first"
                a0, self.kept = rule_selector(self.properties, a_e, s.min_properties)
            else:
                a0 = self.rng.random((k, k))
            a_t = a0
        else:
            a_t = update_network(self.previous, a_e, s.beta) if s.update else self.previous
        a_t = normalize(a_t, s.norm)
        self.previous = a_t
        a = a_t
        if s.learn:  # a fresh GAE, initialised from the server's own stream
            with party_torch_rng(self.seed, self.party_id, "gae", round_idx):
                a = learn_network(x, a_t, s.gae_hidden, s.gae_epochs, s.gae_lr,
                                  s.gae_weight_decay, s.sparsity, s.threshold)  # fmt: skip
        w = mixing_matrix(a, s.self_weight)
        for i in range(k):  # too few remote senders: the receiver would learn their updates
            remote = [j for j in range(k) if j != i and w[i, j] > 0]
            if 0 < len(remote) < min_senders:
                w[i, i] += w[i, remote].sum()
                w[i, remote] = 0.0
                self.fallbacks += 1
        self.W = w
        self.density.append(float((a > 0).mean()))
        self.features = {}
        out: list[Envelope] = []
        if not send:  # plain aggregation: the server mixes, the clients need no weights
            return out
        for i, c in enumerate(self.clients):
            row = [j for j in range(k) if w[i, j] > 0]
            col = [j for j in range(k) if j != i and w[j, i] > 0]
            payload = Payload(
                {"row": w[i, row], "column": w[col, i]},
                {"round": round_idx, "senders": [self.clients[j] for j in row],
                 "receivers": [self.clients[j] for j in col]},
            )  # fmt: skip
            out.append(Envelope(SERVER, c, TAG_WEIGHTS, payload))
        return out


def gpfl_settings(config: ExperimentConfig) -> GPFLSettings:
    """GPFL's settings with the secure sums the protocol stack implies."""
    return config.gpfl.resolved(config.protocol.secure_sum_mode())


@party_builder
def gpfl_client(view: Payload, config: str, seed: int, noise_seed: int | None) -> GPFLClient:
    cfg = config_from_json(config)
    return GPFLClient(graph_view_from_payload(view), cfg, gpfl_settings(cfg), seed, noise_seed)


@party_builder
def gpfl_server(params: np.ndarray, clients: list[str], config: str, seed: int) -> GPFLServer:
    return GPFLServer(params, clients, gpfl_settings(config_from_json(config)), seed)


@party_builder
def gram_authority(party_id: str, server_id: str, clients: list[str]) -> ProtocolHost:
    """The Gram protocol's key authority (CKKS similarities)."""
    role = GramAuthority(party_id, server_id, clients, GramProtocol("ckks").params)
    return ProtocolHost(party_id, role)
