"""FedGL and SpreadFGL (Zhong et al., §III, Algorithm 1) and their baselines (§IV-A), on
the edge runtime (:mod:`securefgl.algorithms.common.edge.runtime`).

* ``spreadfgl``: ``edge_servers`` edge servers (``server_topology``, ring by default),
  Eq. 15's trace regulariser, within-server aggregation every round and Eq. 16 between
  neighbour servers every K rounds, imputation per server over its own clients' nodes;
* ``fedgl``: one edge server covering every client, Eq. 7's loss (no regulariser unless
  ``trace_weight`` is set), imputation every K rounds;
* ``fedavg-fusion``: FedGL without imputation (uniform FedAvg of the same classifier);
* ``localfgl``: the same classifier trained by each client alone.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np
from torch_geometric.data import Data

from protocols.base import Envelope
from securefgl.algorithms.base import Algorithm, Evaluators
from securefgl.algorithms.common.edge.client import EdgeClient, LocalTraining
from securefgl.algorithms.common.edge.parties import local_client
from securefgl.algorithms.common.edge.runtime import EdgeFGL
from securefgl.algorithms.spreadfgl.client import PatchingClient
from securefgl.algorithms.spreadfgl.h_release import H_ADVERSARY
from securefgl.algorithms.spreadfgl.parties import imputing_server, patching_client
from securefgl.algorithms.spreadfgl.server import ImputingServer
from securefgl.algorithms.spreadfgl.settings import SpreadFGLSettings
from securefgl.config import ExperimentConfig
from securefgl.data import ClientGraph
from securefgl.federation import Call, client_party_id
from securefgl.federation.builders import view_payload
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import Recipe, recipe

H_UPLOADS = "H, soft predictions (clients -> edge server)"
PATCHES = "generated neighbour features (edge server -> clients)"


def local_training(config: ExperimentConfig, default_trace: float) -> LocalTraining:
    """The clients' training of the ``spreadfgl`` section and the generic fields."""
    st = config.section(SpreadFGLSettings)
    trace = st.trace_weight if st.trace_weight is not None else default_trace
    return LocalTraining(
        st.local_steps, st.aggregator, trace, st.loss_reduction, config.hidden, config.dropout,
        config.lr, config.weight_decay,
    )  # fmt: skip


class SpreadFGLFamily(EdgeFGL):
    """The edge runtime with SpreadFGL's settings and, with :attr:`impute`, its H uploads,
    imputation and patches every ``interval`` rounds (Algorithm 1 lines 6-11)."""

    name = "fedgl"
    impute: ClassVar[bool] = True
    repairs_cross_edges = True  # its imputation links nodes across clients
    default_trace: ClassVar[float] = 0.0

    @property
    def settings(self) -> SpreadFGLSettings:
        return self.config.section(SpreadFGLSettings)

    def training(self) -> LocalTraining:
        return local_training(self.config, self.default_trace)

    def mix_interval(self) -> int:
        return self.settings.interval

    def client_recipe(
        self, view: ClientGraph, stack: dict[str, Any], train: LocalTraining
    ) -> Recipe:
        if not self.impute:
            return super().client_recipe(view, stack, train)
        fed = self.federation
        return recipe(
            patching_client, view=view_payload(view), stack=stack, training=asdict(train),
            noise_seed=fed.noise_seed, seed=fed.seed,
        )  # fmt: skip

    def server_recipe(
        self, params: np.ndarray, stack: dict[str, Any], neighbours: dict[str, int],
        holds: bool, num_classes: int, num_features: int,
    ) -> Recipe:  # fmt: skip
        if not self.impute:
            return super().server_recipe(params, stack, neighbours, holds, num_classes,
                                         num_features)  # fmt: skip
        return recipe(
            imputing_server, params=params, stack=stack, neighbours=neighbours,
            num_classes=num_classes, num_features=num_features, seed=self.federation.seed,
            holds_model=holds,
        )  # fmt: skip

    def between_rounds(self, round_idx: int) -> None:
        if round_idx % self.settings.interval == 0:
            if self.impute:
                self._impute(round_idx)
            if self.topology.servers > 1:
                self.mix_models(round_idx)

    def _impute(self, round_idx: int) -> None:
        ex = self.executor
        sent = [e for s in ex.map(list(self.clients), PatchingClient.upload_h, round_idx)
                for e in s]  # fmt: skip
        by_server: dict[str, list[Envelope]] = {sid: [] for sid in self.server_list}
        for env in self.federation.channel.transmit(sent):
            by_server[env.receiver].append(env)
        patches = [e for out in ex.call([
            Call.to(sid, ImputingServer.impute, round_idx, box) for sid, box in by_server.items()
        ]) for e in out]  # fmt: skip
        self._deliver(patches, PatchingClient.receive_patch)

    # ----------------------------------------------------------------- reporting
    def h_guarantee(self) -> dict[str, Any]:
        """The worst client's H guarantee (all charge alike), with what it covers."""
        if not self.impute:
            return {}
        reports = self.executor.map(list(self.clients), PatchingClient.h_privacy)
        eps = [r["h_epsilon"] for r in reports if r.get("h_epsilon") is not None]
        out = {k: v for k, v in reports[0].items() if k != "h_epsilon"}
        if eps:
            unit = "per node row of H (local DP), composed over uploads"
            out.update({"h_epsilon": max(eps), "h_adversary": H_ADVERSARY, "h_unit": unit})
        return out

    def privacy(self) -> dict[str, Any]:
        out = super().privacy()
        h = self.h_guarantee()
        out.update(h)
        if h.get("h_epsilon") is not None:
            claim = {"epsilon": h["h_epsilon"], "delta": h.get("h_delta"),
                     "accountant": h.get("h_accountant"), "unit": h["h_unit"],
                     "adversary": H_ADVERSARY}  # fmt: skip
            out["guarantees"] = [*out.get("guarantees", []), claim]
            if "epsilon" not in out:
                out.update({k: claim[k] for k in ("epsilon", "delta", "accountant", "adversary")})
        return out

    def protection(self) -> dict[str, str]:
        out = super().protection()
        if self.impute:
            st = self.settings
            mech = {"none": "none", "gaussian": f"gaussian (σ = {st.h_noise}, C = {st.h_clip})",
                    "rr": f"rr (ε = {st.h_epsilon})"}[st.h_mechanism]  # fmt: skip
            out[H_UPLOADS] = mech + (f", {st.h_rows:.0%} of rows" if st.h_rows < 1 else "")
            out[PATCHES] = "plain (functions of the uploaded H)"
        return out

    def model_label(self) -> str:
        kind = "GraphSAGE-GCN" if self.settings.aggregator == "gcn" else "GraphSAGE"
        return f"{kind} (2 layers)" + (" on the patched subgraph" if self.impute else "")


class FedGL(SpreadFGLFamily):
    name = "fedgl"


class SpreadFGL(SpreadFGLFamily):
    name = "spreadfgl"
    multi_server = True
    default_trace = 1.0


class FedAvgFusion(SpreadFGLFamily):
    """SpreadFGL's FedAvg-fusion baseline: uniform FedAvg, no imputation (§IV-A)."""

    name = "fedavg-fusion"
    impute = False
    repairs_cross_edges = False


class LocalFGL(Algorithm):
    """SpreadFGL's LocalFGL baseline: each client's classifier alone, no message (§IV-A)."""

    name = "localfgl"
    setting = "local"

    def setup(self, federation: Federation, global_data: Data | None = None) -> None:
        train = asdict(local_training(self.config, 0.0))
        views = {client_party_id(v.client_id): v for v in federation.views}
        self.executor = federation.make_executor({
            pid: recipe(local_client, view=view_payload(v), training=train, seed=federation.seed)
            for pid, v in views.items()
        })  # fmt: skip
        self.clients = {pid: self.executor.held(pid) for pid in views}

    def train_round(self, round_idx: int) -> float:
        ids = list(self.clients)
        return float(np.mean(self.executor.map(ids, EdgeClient.train_steps, round_idx)))

    def evaluators(self) -> Evaluators:
        return Evaluators(list(self.clients), EdgeClient.predict)

    def local_work(self) -> str:
        n = local_training(self.config, 0.0).steps
        return f"{n} local Adam step{'s' * (n != 1)}"

    def model_label(self) -> str:
        return "GraphSAGE-GCN (2 layers), local"
