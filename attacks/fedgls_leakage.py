"""What FedGLS (Fu et al., TMLR) releases to the server, attacked.

* :func:`update_feature_support` — adversary: the server, reading each client's round-``r``
  update ``(θ_k − θ ‖ φ_k − φ)`` (over ``plain``, also under central ``clip_noise`` and LDP).
  A first-layer weight column of an absent feature gets no data gradient, so with Adam and
  no weight decay it does not move at all (with decay the adversary subtracts Adam's
  decay-only step, lr·sign(w) per epoch): the moved columns are the client's vocabulary
  (Phong et al. 2017, the analytic part of gradient inversion). φ is distilled on ALL nodes
  (Eq. 11), test and validation nodes included, so its support reveals features that only
  non-training nodes have, which θ (trained on the training nodes' receptive field) does
  not: ``test_only_auc_phi`` vs ``test_only_auc_theta``. Headline ``support_auc_phi``, pooled
  over the clients' (feature, client) pairs; baseline: public feature frequencies (the
  nodes outside the client), as :mod:`attacks.gradient_inversion`.
* :func:`learned_graph_replay` — adversary: the server, knowing a graphless client's node
  features (prior knowledge, as link stealing's attribute adversary). The learner's step
  is a deterministic function of X and the global models (eval mode), which the server
  itself broadcast: it replays every ω step and recomputes the client's learned graph.
  Scored against the client's actual learned graph (edge F1, headline) and against its
  TRUE graph (AUC over balanced edge / non-edge pairs); baselines: the learner's graph at
  ω = ones (what X alone gives: the graph the client starts from) and the raw-feature
  cosine. Not applicable when the
  server never holds the global model (``ckks``). Secure aggregation and DP noise do not
  stop it: the noised global model is exactly what the client used.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.gradient_inversion import receptive_field, split_gradient
from attacks.metrics import roc_auc, support_scores
from attacks.naive import auc_margin, chance_or, heuristic_auc
from attacks.pairs import sample_pairs
from attacks.simulation import AuditRun
from attacks.updates import individual_update_or_reason, model_sent
from securefgl.algorithms.fedgls.clients import MODEL_TAG, FedGLSClient
from securefgl.algorithms.fedgls.graphless import without_edges
from securefgl.algorithms.fedgls.learner import AttentiveLearner
from securefgl.algorithms.fedgls.models import Net, Propagation
from securefgl.data import ClientGraph

SUPPORT = "update_feature_support"
REPLAY = "learned_graph_replay"
REPLAY_ADVERSARY = "server (knowing a graphless client's features)"


def column_scores(net: Net, delta: np.ndarray, params: np.ndarray, run: AuditRun) -> np.ndarray:
    """Per input feature: how far its first-layer column moved beyond pure weight decay."""
    cfg = run.config
    moved = _first_weight(net, delta)  # [hidden, d]
    if cfg.weight_decay > 0:
        w = _first_weight(net, params)
        moved = moved + cfg.local_epochs * cfg.lr * np.sign(w)
    return np.abs(moved).sum(axis=0)


def _first_weight(net: Net, flat: np.ndarray) -> np.ndarray:
    """The first layer's weight matrix ([out, d]) inside a flat vector of ``net``."""
    first = {id(p) for p in net.layers[0].parameters() if p.dim() == 2}
    for p, part in zip(net.parameters(), split_gradient(net, flat), strict=True):
        if id(p) in first:
            return part.double().numpy()
    raise ValueError("the network's first layer has no weight matrix")


def _nets(run: AuditRun, view: ClientGraph) -> tuple[Net, Net]:
    cfg, d, c = run.config, view.num_features, view.num_classes
    s = cfg.fedgls
    gcn = Net("gcn", d, cfg.hidden, c, s.split, cfg.dropout)
    return gcn, Net("mlp", d, cfg.hidden, c, s.split, cfg.dropout, head=False)


def update_feature_support(run: AuditRun, round_idx: int = 0) -> AttackResult:
    """The server reads each client's vocabulary off its θ and φ updates of ``round_idx``."""
    if run.result.algorithm != "fedgls":
        return not_applicable(
            SUPPORT, SERVER, f"targets FedGLS updates, not {run.result.algorithm}"
        )
    params = model_sent(run.transcript, SERVER, MODEL_TAG, round_idx - 1)
    if params is None:
        return not_applicable(SUPPORT, SERVER, f"the server held no round-{round_idx} model")
    algo, view_of = run.state.algorithm, run.view(SERVER)
    rows: dict[str, list[np.ndarray]] = {
        k: [] for k in ("phi", "theta", "all", "only", "absent", "freq")
    }
    for c, view in enumerate(run.views):
        cid = f"client-{view.client_id}"
        got = individual_update_or_reason(view_of, cid, round_idx)
        if isinstance(got, str):
            return not_applicable(SUPPORT, SERVER, got)
        update, _ = got
        gcn, mlp = _nets(run, view)
        cut = algo.layout.sizes[0]
        rows["theta"].append(column_scores(gcn, update[:cut], params[:cut], run))
        rows["phi"].append(
            column_scores(
                mlp, update[cut : algo.layout.params_dim], params[cut : algo.layout.params_dim], run
            )
        )
        # ground truth: features of all the client's nodes (φ) and of the training nodes'
        # receptive field over the graph the client trained on (θ)
        x = view.x.numpy()
        present = (x != 0).any(axis=0)
        prop: Propagation = algo.clients[cid].prop
        train = np.flatnonzero(view.train_mask.numpy())
        field = receptive_field(prop.edge_pairs(), view.num_nodes, train, run.config.layers)
        in_field = (x[field] != 0).any(axis=0)
        rows["all"].append(present)
        rows["only"].append(present & ~in_field)
        rows["absent"].append(~present)
        public = np.ones(run.state.graph.num_nodes, bool)
        public[run.global_nodes(c)] = False
        rows["freq"].append(np.abs(run.state.graph.x.numpy()[public]).mean(axis=0))
    cat = {k: np.concatenate(v) for k, v in rows.items()}
    only = cat["only"] | cat["absent"]  # test-only features vs features nobody has
    pos, neg = int(cat["all"].sum()), int((~cat["all"]).sum())
    if pos == 0 or neg == 0:  # the support AUC needs present and absent (feature, client)s
        which = "every feature occurs on every client" if neg == 0 else "no client has a feature"
        return not_applicable(
            SUPPORT, SERVER,
            f"{which} (dense features, e.g. a generated graph): a client's support is then "
            "known without its update, and the support AUC is undefined",
            features_present=pos, features_absent=neg,
        )  # fmt: skip
    metrics = {
        "support_auc_phi": roc_auc(cat["phi"], cat["all"]),
        "support_auc_theta": roc_auc(cat["theta"], cat["all"]),
        "test_only_auc_phi": roc_auc(cat["phi"][only], cat["only"][only]),
        "test_only_auc_theta": roc_auc(cat["theta"][only], cat["only"][only]),
    }
    base_all = heuristic_auc(cat["freq"], cat["all"])
    base_only = heuristic_auc(cat["freq"][only], cat["only"][only])
    baselines = {
        "support_auc_phi": base_all,
        "support_auc_theta": base_all,
        "test_only_auc_phi": base_only,
        "test_only_auc_theta": base_only,
    }
    n_only = int(cat["only"].sum())
    margins = {
        "support_auc_phi": auc_margin(metrics["support_auc_phi"], pos, neg),
        "support_auc_theta": auc_margin(metrics["support_auc_theta"], pos, neg),
        "test_only_auc_phi": auc_margin(metrics["test_only_auc_phi"], n_only, neg),
        "test_only_auc_theta": auc_margin(metrics["test_only_auc_theta"], n_only, neg),
    }
    moved = cat["phi"] > 1e-12
    details = {
        "round": round_idx,
        "clients": len(run.views),
        "features_present": pos,
        "features_only_outside_training_field": n_only,
        "phi_support_exact": support_scores(moved, cat["all"]),
        "weight_decay": run.config.weight_decay,
    }
    return AttackResult(
        SUPPORT, SERVER, metrics, "support_auc_phi", None, details, baselines, margins
    )


def _broadcasts(run: AuditRun) -> list[np.ndarray] | str:
    """The global model the server sent before each round (-1 .. R-2), or why not."""
    sent: dict[int, np.ndarray] = {}
    for e in run.transcript.sent_by(SERVER):
        if e.tag == MODEL_TAG and e.round not in sent:
            if e.data is None:
                return f"the transcript kept no payload of {MODEL_TAG} in round {e.round}"
            sent[e.round] = e.payload().array("params").astype(np.float32)
    rounds = range(-1, run.config.rounds - 1)
    missing = [r for r in rounds if r not in sent]
    if missing:
        return (
            "the server never held the global model after set-up (the aggregate goes to the "
            f"clients, e.g. ckks): no broadcast in rounds {missing[:3]}…"
            if -1 in sent
            else "the server sent no model"
        )
    return [sent[r] for r in rounds]


def _edges(prop: Propagation) -> set[tuple[int, int]]:
    pairs = prop.edge_pairs().numpy()
    keep = pairs[0] < pairs[1]
    return set(zip(pairs[0][keep].tolist(), pairs[1][keep].tolist(), strict=True))


def replay_graph(run: AuditRun, client: FedGLSClient, models: list[np.ndarray]) -> AttentiveLearner:
    """The adversary's copy of the client's learner after every round's ω step."""
    cfg, view = run.config, client.view
    s = cfg.fedgls
    n = view.num_nodes
    none = torch.zeros(n, dtype=torch.bool)  # the adversary knows X only
    replica_view = dataclasses.replace(
        without_edges(view), y=torch.zeros(n, dtype=torch.long), train_mask=none,
        val_mask=none.clone(), test_mask=none.clone(), node_ids=torch.zeros(n, dtype=torch.long),
    )  # fmt: skip
    gcn, mlp = _nets(run, view)
    learner = AttentiveLearner(view.num_features, s.learner_layers, s.knn_k)
    copy = FedGLSClient(
        replica_view, cfg, None, client.layout, {0: gcn, 1: mlp}, None, learner=learner
    )
    for params in models:
        copy.params = params
        copy.load()
        copy.learn_graph()
    return learner


def learned_graph_replay(run: AuditRun, max_pairs: int = 4000, seed: int = 0) -> AttackResult:
    """The server recomputes each graphless client's learned graph from X and its own
    broadcasts; scored against the learned and the true graphs."""
    if run.result.algorithm != "fedgls":
        return not_applicable(
            REPLAY, REPLAY_ADVERSARY, f"targets FedGLS, not {run.result.algorithm}"
        )
    models = _broadcasts(run)
    if isinstance(models, str):
        return not_applicable(REPLAY, REPLAY_ADVERSARY, models)
    algo, rng, s = run.state.algorithm, np.random.default_rng(seed), run.config.fedgls
    counts = {"replay": np.zeros(3), "naive": np.zeros(3)}  # tp, fp, fn against the learned
    scores: dict[str, list[np.ndarray]] = {"replay": [], "feature": []}
    labels: list[np.ndarray] = []
    targets = [
        (c, v) for c, v in enumerate(run.views) if algo.clients[f"client-{v.client_id}"].graphless
    ]
    if not targets:
        return not_applicable(REPLAY, REPLAY_ADVERSARY, "no graphless client in this run")
    for c, view in targets:
        client = algo.clients[f"client-{view.client_id}"]
        x = client.view.x
        learner = replay_graph(run, client, models)
        with torch.no_grad():
            guesses = {
                "replay": _edges(learner(x)),
                "naive": _edges(AttentiveLearner(view.num_features, s.learner_layers, s.knn_k)(x)),
            }
            embed = learner.embed(x).numpy().astype(np.float64)
        actual = _edges(client.prop)
        for key, guess in guesses.items():
            counts[key] += (len(guess & actual), len(guess - actual), len(actual - guess))
        pairs, lab = sample_pairs(run.truth_local_adjacency(c), max_pairs // len(targets), rng)
        if len(pairs):
            xn = x.numpy().astype(np.float64)
            xn /= np.maximum(np.linalg.norm(xn, axis=1, keepdims=True), 1e-12)
            scores["replay"].append((embed[pairs[:, 0]] * embed[pairs[:, 1]]).sum(1))
            scores["feature"].append((xn[pairs[:, 0]] * xn[pairs[:, 1]]).sum(1))
            labels.append(lab)
    f1 = {k: 2 * tp / max(2 * tp + fp + fn, 1) for k, (tp, fp, fn) in counts.items()}
    metrics, baselines = {"learned_f1": f1["replay"]}, {"learned_f1": f1["naive"]}
    margins: dict[str, float] = {}
    if labels:
        y = np.concatenate(labels)
        auc = roc_auc(np.concatenate(scores["replay"]), y)
        metrics["true_auc"] = auc
        baselines["true_auc"] = chance_or(roc_auc(np.concatenate(scores["feature"]), y))
        margins["true_auc"] = auc_margin(auc, int(y.sum()), int((~y).sum()))
    details = {
        "graphless_clients": len(targets),
        "rounds_replayed": len(models),
        "learned_edges": int(counts["replay"][0] + counts["replay"][2]),
    }
    return AttackResult(
        REPLAY, REPLAY_ADVERSARY, metrics, "learned_f1", None, details, baselines, margins
    )
