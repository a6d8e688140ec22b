"""FedVN's parties (Fu et al., AAAI 2025, Algorithm 1): the client (θ, Q and its personal
edge generator ω; its side of the model aggregation and of the s_global secure sum) and the
server (FedAvg's, plus its relay of the sum). Algorithm:
:mod:`securefgl.algorithms.fedvn.algorithm`.

A client's round (§4.4, as the code runs it): from the global θ and Q, one pass over its
shuffled training graphs updating only ω by ∇(L_S + λ2 L_E) (θ's dropout off, batch norms
on batch statistics), then one pass updating θ by ∇L_S and Q by ∇(L_S + λ1 L_V) (ω's
dropout off); its update of (θ, Q) goes to the protocol stack. s_local, inside L_E, is the
mean s̃ of the previous mini-batch (the code; starts at 0.5·1 and persists across rounds);
the vector a client contributes to s_global is the mean s̃ over its graphs in the ω pass
(the paper's s_local^(k)). ω and s_local never leave the client.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from protocols.base import AggregationClient, AggregationServer
from protocols.dp.rng import make_rng
from protocols.secure_sum import SumRequest
from protocols.wire import Payload
from securefgl.algorithms.base import SplitPredictions
from securefgl.algorithms.common.graph.batching import Batch, GraphBatches
from securefgl.algorithms.common.graph.learner import make_optimizer
from securefgl.algorithms.common.graph.settings import GraphTaskSettings
from securefgl.algorithms.common.server_optimizer import GlobalOptimizer
from securefgl.algorithms.common.training import party_torch_rng, unlinked
from securefgl.algorithms.fedavg.parties import FedAvgServer, RoundClient
from securefgl.algorithms.fedvn.model import (
    VNGIN,
    EdgeScorer,
    decoupling_loss,
    graph_scores,
    score_contrastive_loss,
)
from securefgl.algorithms.fedvn.settings import FedVNSettings
from securefgl.config import ExperimentConfig
from securefgl.data.graph_views import GraphClientView
from securefgl.federation import SERVER, Party, client_party_id
from securefgl.federation.builders import config_from_json, graph_view_from_payload, protocol_party
from securefgl.federation.hosted_sums import HostedSum
from securefgl.federation.recipes import party_builder
from securefgl.models import get_flat, set_flat

PLAIN_AVERAGE = ("sgd", 1.0, 0.0)  # server step 1 on the mean delta: the weighted average


def build_vn_model(num_features: int, num_classes: int, config: ExperimentConfig) -> VNGIN:
    g, s = config.section(GraphTaskSettings), config.section(FedVNSettings)
    return VNGIN(num_features, g.hidden, num_classes, g.layers, g.dropout, s.virtual_nodes)


def shared_vector(model: nn.Module, Q: torch.Tensor) -> np.ndarray:
    """θ ‖ Q, flat: what is averaged."""
    return np.concatenate([get_flat(model), Q.detach().numpy().reshape(-1)])


@contextmanager
def frozen(params: Iterable[nn.Parameter]) -> Iterator[None]:
    """No gradients for ``params`` inside the block (the ω pass does not step θ or Q)."""
    params = list(params)
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


class FedVNClient(RoundClient, Party):
    """A FedVN client: its graphs, θ and Q as it trains them, its own ω."""

    def __init__(
        self,
        view: GraphClientView,
        config: ExperimentConfig,
        settings: FedVNSettings,
        agg: AggregationClient,
        seed: int,
        noise_seed: int | None,
    ) -> None:
        self.party_id = client_party_id(view.client_id)
        self.config, self.s = config, settings
        self.g = g = config.section(GraphTaskSettings)
        self.train_set = GraphBatches(view.dataset(view.train_mask))
        self.test_set = GraphBatches(view.dataset(view.test_mask))
        assert view.val_mask is not None
        has_val = bool(view.val_mask.any())
        self.val_set = GraphBatches(view.dataset(view.val_mask)) if has_val else None
        self.seed = seed  # the experiment's: initialisation, dropout and shuffling streams
        with party_torch_rng(seed, self.party_id, "init"):  # θ: replaced by the initial model
            self.model = build_vn_model(view.num_features, view.num_classes, config)
        with party_torch_rng(seed, self.party_id, "omega"):  # ω: this client's own
            self.scorer = EdgeScorer(view.num_features, settings.edge_hidden, g.layers,
                                     g.dropout, settings.virtual_nodes)  # fmt: skip
        m = settings.virtual_nodes
        self.Q = nn.Parameter(torch.zeros(m, g.hidden))
        self.opt_theta = make_optimizer(self.model.parameters(), g)
        self.opt_q = make_optimizer([self.Q], g)
        self.opt_omega = make_optimizer(self.scorer.parameters(), g)
        self.s_local = torch.full((m,), 0.5)  # the code's start
        self.s_global = torch.full((m,), 1.0 / m)  # the code's constant; the first round's
        self.s_upload: np.ndarray | None = None  # mean s̃ of the last ω pass
        self.shuffle = np.random.default_rng([seed, view.client_id])  # simulation, not privacy
        self.coin = make_rng(noise_seed, "client-sampling", self.party_id)
        self.agg = agg
        self.sums = HostedSum(self.party_id)
        self.weight = float(view.num_train)
        self.params: np.ndarray | None = None
        self.global_opt: GlobalOptimizer | None = None

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg, *self.sums.roles())

    def optimizer_settings(self) -> tuple[str, float, float]:
        return PLAIN_AVERAGE

    # -- the global model ------------------------------------------------------------------
    def _load_global(self) -> None:
        if self.params is None:
            raise RuntimeError(f"{self.party_id}: no global model received")
        n = self.params.size - self.Q.numel()
        set_flat(self.model, self.params[:n].astype(np.float32))
        with torch.no_grad():
            self.Q.copy_(torch.from_numpy(self.params[n:].astype(np.float32)).view_as(self.Q))

    # -- local training ----------------------------------------------------------------------
    def _omega_pass(self) -> None:
        """Step ω on L_S + λ2 L_E; θ and Q fixed (θ in eval mode)."""
        s, g = self.s, self.g
        self.scorer.train()
        self.model.eval()
        total, count = torch.zeros(s.virtual_nodes), 0
        with frozen([*self.model.parameters(), self.Q]):
            for b in self.train_set.iterate(g.batch_size, self.shuffle):
                S = self.scorer(b)
                scores = graph_scores(S, b)
                loss = F.nll_loss(self.model(b, self.Q, S), b.y)
                if s.lambda_contrast > 0:
                    loss = loss + s.lambda_contrast * score_contrastive_loss(
                        scores, self.s_local, self.s_global, s.tau
                    )  # fmt: skip
                self.opt_omega.zero_grad()
                loss.backward()
                self.opt_omega.step()
                if s.s_local == "batch":  # the code: the last batch's mean
                    self.s_local = scores.mean(0).detach()
                total += scores.detach().sum(0)
                count += b.num_graphs
        mean = total / max(count, 1)
        if s.s_local == "all":  # the paper: the mean over the client's graphs (this pass's)
            self.s_local = mean
        self.s_upload = mean.numpy().astype(np.float64)

    def _theta_pass(self) -> float:
        """Step θ on L_S and Q on L_S + λ1 L_V; ω fixed (its dropout off)."""
        s, g = self.s, self.g
        self.model.train()
        self.scorer.eval()
        total, count = 0.0, 0
        for b in self.train_set.iterate(g.batch_size, self.shuffle):
            with torch.no_grad():
                S = self.scorer(b)
            ce = F.nll_loss(self.model(b, self.Q, S), b.y)
            loss = ce + s.lambda_decouple * decoupling_loss(self.Q) if s.lambda_decouple else ce
            self.opt_theta.zero_grad()
            self.opt_q.zero_grad()
            loss.backward()
            self.opt_theta.step()
            self.opt_q.step()
            total += ce.item() * b.num_graphs
            count += b.num_graphs
        return total / max(count, 1)

    def local_update(self, round_idx: int, mu: float) -> float:
        self._load_global()
        loss = 0.0
        with party_torch_rng(self.seed, self.party_id, round_idx):  # this client's dropout
            for _ in range(self.config.local_epochs):
                self._omega_pass()
            for _ in range(self.config.local_epochs):
                loss = self._theta_pass()
        delta = shared_vector(self.model, self.Q).astype(np.float64) - self.params  # type: ignore[operator]
        self.submit(round_idx, delta, max(self.weight, 1e-12))
        return loss

    # -- s_global by a secure sum --------------------------------------------------------------
    def prepare_scores(self, others: list[str]) -> int:
        """Send my mean edge-score vector to every other client's sum; ask for theirs."""
        if self.s_upload is None:
            raise RuntimeError(f"{self.party_id}: no edge scores yet (train first)")
        for other in others:
            self.sums.client.add_contribution(other, self.s_upload)
        self.sums.client.expect_sum(SumRequest(tuple(others), self.s_upload.shape),
                                    local=self.s_upload)  # fmt: skip
        return len(others)

    def finish_scores(self, clients: int) -> None:
        """s_global = (1/K) Σ_k s_local^(k) for the next round."""
        result = self.sums.client.result()
        if result is None:
            raise RuntimeError(f"{self.party_id}: the s_global sum did not complete")
        self.s_global = torch.from_numpy(np.asarray(result.total, dtype=np.float32) / clients)

    # -- evaluation ----------------------------------------------------------------------------
    @torch.no_grad()
    def _predict(self, data: GraphBatches) -> tuple[np.ndarray, np.ndarray]:
        if len(data) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        size = self.g.eval_batch_size
        batches: list[Batch] = [data.all()] if size is None else data.in_order(size)
        preds = [self.model(b, self.Q, self.scorer(b)).argmax(1) for b in batches]
        return data.y.numpy(), torch.cat(preds).numpy()

    def predict(self) -> SplitPredictions:
        """The global θ and Q with this client's ω on its own test (and validation) graphs."""
        self._load_global()
        self.model.eval()
        self.scorer.eval()
        out = {"test": unlinked(*self._predict(self.test_set))}
        if self.val_set is not None:
            out["val"] = unlinked(*self._predict(self.val_set))
        return out


class FedVNServer(FedAvgServer):
    """FedAvg's server (plain averaging of θ ‖ Q) that also relays the s_global sums."""

    def __init__(self, params: np.ndarray, agg: AggregationServer, holds_model: bool) -> None:
        super().__init__(params, agg, holds_model, GlobalOptimizer(params, *PLAIN_AVERAGE))
        self.sums = HostedSum(self.party_id)

    def roles(self) -> Iterable[object | None]:
        return (self, self.agg, *self.sums.roles())


def fedvn_settings(config: ExperimentConfig) -> FedVNSettings:
    """FedVN's settings with the secure-sum mode the protocol stack implies."""
    return config.section(FedVNSettings).resolved(config.protocol.secure_sum_mode())


@party_builder
def fedvn_client(
    view: Payload, stack: dict[str, Any], seed: int, noise_seed: int | None
) -> FedVNClient:
    v = graph_view_from_payload(view)
    config = config_from_json(stack["config"])
    agg = protocol_party(stack, client_party_id(v.client_id))
    return FedVNClient(v, config, fedvn_settings(config), agg, seed, noise_seed)


@party_builder
def fedvn_server(params: np.ndarray, stack: dict[str, Any], holds: bool) -> FedVNServer:
    return FedVNServer(params, protocol_party(stack, SERVER), holds)
