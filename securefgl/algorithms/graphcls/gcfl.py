"""GCFL+ (Xie et al., NeurIPS 2021, §4.2): clustered FL with DTW on update-norm sequences.

GPFL's "GCFL" baseline is GCFL+ (its code's ``run_gcflplus_dWs``): every round each client
trains from its current model and sends its update ΔW; the server keeps, per client, the
sequence of ‖ΔW‖; a cluster whose mean update is small (‖mean ΔW‖ < ε1) while one member's
is large (max ‖ΔW‖ > ε2), with more than 2 members, after round 20 and once every sequence
holds ``seq_length`` norms, is cut in two by a Stoer–Wagner minimum cut of the similarity
``max D − D`` (D: DTW distances of the last ``seq_length`` norms; every sequence is then
reset); each client then adds its cluster's update average weighted by training graphs.

Who sees what: the server receives every client's update in the clear (the method needs the
per-client norms and cluster sums); each client receives its cluster's average update.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from torch_geometric.data import Data

from protocols.base import Envelope
from protocols.wire import Payload
from securefgl.algorithms.base import Evaluators
from securefgl.algorithms.common.graph.learner import (
    INITIAL_MODEL,
    GraphAlgorithm,
    GraphLearner,
    InitServer,
    build_model,
    deliver,
    send_initial,
)
from securefgl.config import ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Call, Party, client_party_id
from securefgl.federation.builders import (
    config_from_json,
    config_json,
    graph_view_from_payload,
    graph_view_payload,
)
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import party_builder, recipe
from securefgl.models import get_flat

UPDATE_TAG = "gcfl/update"
CLUSTER_TAG = "gcfl/cluster-update"
UPDATES = "model updates (clients -> server)"
CLUSTER_UPDATES = "cluster-average updates (server -> clients)"


def dtw_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Dynamic time warping distance: the square root of the least summed squared
    difference along a warping path (``dtaidistance.dtw.distance`` without a window)."""
    n, m = len(a), len(b)
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d = (a[i - 1] - b[j - 1]) ** 2
            cost[i, j] = d + min(cost[i - 1, j], cost[i, j - 1], cost[i - 1, j - 1])
    return float(np.sqrt(cost[n, m]))


def min_cut(similarity: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stoer–Wagner minimum cut of the complete graph weighted by ``similarity``."""
    g = nx.Graph()
    for i in range(len(members)):
        for j in range(len(members)):
            if i != j:
                g.add_edge(i, j, weight=float(similarity[i, j]))
    _, (left, right) = nx.stoer_wagner(g)
    return members[sorted(left)], members[sorted(right)]


class GCFLClient(GraphLearner, Party):
    """A GCFL+ client: its own GIN, moved only by its cluster's average update."""

    def __init__(self, view: GraphClientView, config: ExperimentConfig, seed: int) -> None:
        self.init_learner(view, config, "gin", seed)
        self.start: np.ndarray | None = None

    def send_update(self, round_idx: int) -> tuple[float, list[Envelope]]:
        """Train from the current model, keep the start, send ΔW and the training weight."""
        self.start = self.flat
        loss = self.train_local(round_idx)
        delta = self.flat.astype(np.float64) - self.start
        self.load_flat(self.start)  # the model moves only by the cluster average
        payload = Payload({"delta": delta}, {"round": round_idx, "weight": self.weight})
        return loss, [Envelope(self.party_id, SERVER, UPDATE_TAG, payload)]

    def apply_cluster(self, round_idx: int, inbox: list[Envelope]) -> None:
        for env in inbox:
            if env.tag == CLUSTER_TAG and self.start is not None:
                self.load_flat(self.start + env.payload.array("mean"))


class GCFLServer(InitServer):
    def __init__(self, params: np.ndarray, clients: list[str], eps: tuple[float, float],
                 seq_length: int) -> None:  # fmt: skip
        super().__init__(params)
        self.clients = list(clients)
        self.eps1, self.eps2 = eps
        self.seq_length = seq_length
        self.clusters = [np.arange(len(clients))]
        self.seqs: dict[int, list[float]] = {i: [] for i in range(len(clients))}
        self.splits: list[int] = []  # rounds at which a cluster was split

    def cluster_round(self, round_idx: int, inbox: list[Envelope]) -> list[Envelope]:
        index = {c: i for i, c in enumerate(self.clients)}
        deltas: dict[int, np.ndarray] = {}
        weights: dict[int, float] = {}
        for env in inbox:
            i = index[env.sender]
            deltas[i] = env.payload.array("delta")
            weights[i] = float(env.payload.meta["weight"])
            self.seqs[i].append(float(np.linalg.norm(deltas[i])))
        new = []
        for members in self.clusters:
            stack = np.stack([deltas[i] for i in members])
            mean_norm = float(np.linalg.norm(stack.mean(0)))
            max_norm = float(np.linalg.norm(stack, axis=1).max())
            ready = all(len(s) >= self.seq_length for s in self.seqs.values())
            if (mean_norm < self.eps1 and max_norm > self.eps2 and len(members) > 2
                    and round_idx + 1 > 20 and ready):  # fmt: skip
                seqs = [np.array(self.seqs[i][-self.seq_length:]) for i in members]
                dist = np.array([[dtw_distance(a, b) for b in seqs] for a in seqs])
                new += list(min_cut(dist.max() - dist, members))
                self.seqs = {i: [] for i in self.seqs}
                self.splits.append(round_idx)
            else:
                new.append(members)
        self.clusters = new
        out = []
        for members in self.clusters:
            w = np.array([weights[i] for i in members])
            mean = np.tensordot(w / w.sum(), np.stack([deltas[i] for i in members]), axes=1)
            payload = Payload({"mean": mean}, {"round": round_idx})
            out += [Envelope(SERVER, self.clients[i], CLUSTER_TAG, payload) for i in members]
        return out


@party_builder
def gcfl_client(view: Payload, config: str, seed: int) -> GCFLClient:
    return GCFLClient(graph_view_from_payload(view), config_from_json(config), seed)


@party_builder
def gcfl_server(
    params: np.ndarray, clients: list[str], eps: list[float], seq_length: int
) -> GCFLServer:
    return GCFLServer(params, clients, (eps[0], eps[1]), seq_length)


class GCFLPlus(GraphAlgorithm):
    name = "gcfl"
    clear_updates = "GCFL+ clusters the clients on their individual updates, which its server reads"
    all_clients = True  # every client trains and uploads every round (its clustering needs all)

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        cfg = self.config
        views: list[GraphClientView] = federation.views  # type: ignore[assignment]
        self.ids = [client_party_id(v.client_id) for v in views]
        init = build_model("gin", views[0].num_features, views[0].num_classes, cfg)
        eps = cfg.graph.gcfl_eps(cfg.dataset)
        config = config_json(cfg)
        self.executor = federation.make_executor({
            SERVER: recipe(gcfl_server, params=get_flat(init), clients=self.ids, eps=list(eps),
                           seq_length=cfg.graph.gcfl_seq_length),
            **{pid: recipe(gcfl_client, view=graph_view_payload(v), config=config,
                           seed=federation.seed) for pid, v in zip(self.ids, views, strict=True)},
        })  # fmt: skip
        self.clients = {pid: self.executor.held(pid) for pid in self.ids}
        self.server = self.executor.held(SERVER)
        self.federation = federation
        send_initial(self.executor, federation.channel, self.ids)
        self._weights = np.array(self.executor.map(self.ids, GraphLearner.training_weight))

    def train_round(self, round_idx: int) -> float:
        channel, ex = self.federation.channel, self.executor
        channel.round = round_idx
        out = ex.map(self.ids, GCFLClient.send_update, round_idx)
        inbox = channel.transmit([env for _, sent in out for env in sent])
        sent = ex.call([Call.to(SERVER, GCFLServer.cluster_round, round_idx, inbox)])[0]
        deliver(ex, channel, sent, GCFLClient.apply_cluster, round_idx)
        return float(np.average([loss for loss, _ in out], weights=self._weights))

    def evaluators(self) -> Evaluators:
        return Evaluators(self.ids, GraphLearner.predict)

    def protection(self) -> dict[str, str]:
        return {INITIAL_MODEL: "plain", UPDATES: "plain (GCFL+ needs every client's update)",
                CLUSTER_UPDATES: "plain"}  # fmt: skip

    def model_label(self) -> str:
        return f"GIN ({len(self.server.clusters)} clusters at the end)"
