"""Gradient inversion of node features from one client's FedAvg-GCN update (server).

Adversary: the server, from its transcript view: the client's update in round ``r``
(``-client_lr·∇`` for one local SGD step: FedSGD) and the model it broadcast before.

* Analytic (Phong et al. 2017; iDLG, Zhao et al. 2020): the first layer's weight gradient is
  ``Σ_v (Â X)_v ⊗ δ_v``, so its rows for feature f vanish exactly when no node in the
  training nodes' receptive field has f: for bag-of-words features the server reads the
  client's vocabulary (**feature-support recovery**, headline ``support_auc``; support
  precision / recall / F1 beside the trivial ``support_f1_predict_all``).
* Optimisation (DLG, Zhu et al. 2019; cosine loss of Geiping et al. 2020): dummy rows
  ``sigmoid(Z)`` for the update's training nodes on the recovered support, labels from the
  last bias gradient, Adam on ``1 − cos(∇', ∇)``; cosine and MSE to the true features after
  Hungarian matching.

Deviations: the server knows neither the client's edges (DLG assumes ``Â = I``) nor its
dropout masks, so the optimisation part underestimates a stronger attack. Under secagg /
ckks no individual update is visible: not applicable.

Baselines (:mod:`attacks.naive`) from public statistics, simulated by the feature rows of
every node outside the client: support AUC of the public feature frequencies, support
precision / recall / F1 of the top-|recovered| most frequent features; cosine, MSE and
row-support F1 of the public mean row guessed for every node.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from attacks.base import DEFAULT_MARGIN, SERVER, AttackResult, not_applicable
from attacks.metrics import roc_auc, row_support_f1, rowwise_cosine, support_scores
from attacks.naive import auc_margin, heuristic_auc, mean_row_guess, top_m
from attacks.simulation import AuditRun
from attacks.updates import individual_update_or_reason, model_sent
from securefgl.models import build_model, set_flat

NAME = "gradient_inversion"
MODEL_TAG = "fedavg/model"


def split_gradient(model: nn.Module, flat: np.ndarray) -> list[torch.Tensor]:
    """Cut a flat vector into tensors shaped like ``model``'s parameters."""
    out, offset = [], 0
    vec = torch.as_tensor(flat, dtype=torch.float32)
    for p in model.parameters():
        out.append(vec[offset : offset + p.numel()].view_as(p).clone())
        offset += p.numel()
    if offset != vec.numel():
        raise ValueError(f"update has {vec.numel()} entries, the model {offset}")
    return out


def first_layer_scores(model: nn.Module, grads: list[torch.Tensor], in_dim: int) -> np.ndarray:
    """L1 norm of each input feature's first-layer weight-gradient column (0: unused)."""
    first = model.layers[0] if hasattr(model, "layers") else model
    ids = {id(p) for p in first.parameters()}
    scores = np.zeros(in_dim)
    for p, g in zip(model.parameters(), grads, strict=True):
        if id(p) in ids and g.dim() == 2 and g.shape[1] == in_dim:
            scores += g.abs().sum(dim=0).double().numpy()
    return scores


def last_bias_gradient(model: nn.Module, grads: list[torch.Tensor]) -> torch.Tensor:
    """The gradient of the output layer's bias (the 1-d parameter of the last layer)."""
    last = model.layers[-1] if hasattr(model, "layers") else model
    ids = {id(p) for p in last.parameters() if p.dim() == 1}
    for p, g in zip(model.parameters(), grads, strict=True):
        if id(p) in ids:
            return g
    raise ValueError("the model's last layer has no bias")


def single_node_inversion(grad_w: np.ndarray, grad_b: np.ndarray) -> np.ndarray:
    """Exact input of a one-node linear layer ``Wx + b`` from its gradients (rank one)."""
    gb = np.asarray(grad_b, np.float64)
    return np.asarray(grad_w, np.float64).T @ gb / max(float(gb @ gb), 1e-300)


def label_counts(grad_bias_last: np.ndarray, batch: int) -> np.ndarray:
    """Per-class label counts from the last bias gradient of a mean-CE loss (≈ iDLG)."""
    c = grad_bias_last.size
    est = batch * (1.0 / c - np.asarray(grad_bias_last, np.float64))
    counts = np.floor(np.clip(est, 0, None)).astype(int)
    rest = batch - counts.sum()  # largest remainders get the leftover labels
    if rest > 0:
        counts[np.argsort(-(est - counts))[:rest]] += 1
    while counts.sum() > batch:
        counts[np.argmax(counts)] -= 1
    return counts


def dlg(
    model: nn.Module,
    target: list[torch.Tensor],
    batch: int,
    in_dim: int,
    support: np.ndarray,
    steps: int = 300,
    lr: float = 0.1,
    binary: bool = True,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Optimise dummy features (edgeless graph) so their gradient matches ``target``."""
    # saturated sigmoids make denormals (30x slower): flush them, for this call only (the
    # flag is process-wide CPU state)
    torch.set_flush_denormal(True)
    try:
        return _dlg(model, target, batch, in_dim, support, steps, lr, binary, seed)
    finally:
        torch.set_flush_denormal(False)


def _dlg(
    model: nn.Module,
    target: list[torch.Tensor],
    batch: int,
    in_dim: int,
    support: np.ndarray,
    steps: int,
    lr: float,
    binary: bool,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    gen = torch.Generator().manual_seed(seed)
    counts = label_counts(last_bias_gradient(model, target).numpy(), batch)
    labels = torch.as_tensor(np.repeat(np.arange(counts.size), counts), dtype=torch.long)
    mask = torch.as_tensor(support, dtype=torch.float32)
    z = (torch.randn(batch, in_dim, generator=gen) * 0.1).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=lr)
    empty = torch.zeros(2, 0, dtype=torch.long)
    params = list(model.parameters())
    flat_t = torch.cat([g.reshape(-1) for g in target])
    model.eval()
    for _ in range(steps):
        opt.zero_grad()
        x = (torch.sigmoid(z) if binary else z) * mask
        loss = nn.functional.cross_entropy(model(x, empty), labels)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        flat = torch.cat([g.reshape(-1) for g in grads])
        obj = 1 - nn.functional.cosine_similarity(flat, flat_t, dim=0)
        obj.backward()
        opt.step()
    with torch.no_grad():
        x = (torch.sigmoid(z) if binary else z) * mask
    return x.numpy().astype(np.float64), labels.numpy()


def match_rows(recovered: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching of recovered to true rows by cosine similarity."""
    a = recovered / np.maximum(np.linalg.norm(recovered, axis=1, keepdims=True), 1e-12)
    b = true / np.maximum(np.linalg.norm(true, axis=1, keepdims=True), 1e-12)
    r, c = linear_sum_assignment(-(a @ b.T))
    return r, c


def receptive_field(edge_index: torch.Tensor, n: int, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Nodes within ``hops`` of ``seeds`` (boolean mask)."""
    src, dst = edge_index.numpy()
    a = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n)) + sp.identity(n)
    reach = np.zeros(n, bool)
    reach[seeds] = True
    for _ in range(hops):
        reach = reach | (a @ reach.astype(float) > 0)
    return reach


def gradient_inversion(
    run: AuditRun,
    client: int = 0,
    round_idx: int = 0,
    steps: int = 300,
    seed: int = 0,
    batch_guess: int = 32,
) -> AttackResult:
    """The server inverts client ``client``'s update of ``round_idx``."""
    if run.result.algorithm not in ("fedavg", "fedprox"):
        algo = run.result.algorithm
        return not_applicable(NAME, SERVER, f"targets FedAvg-GCN updates, not {algo}")
    cfg = run.config
    cid = f"client-{run.views[client].client_id}"
    got = individual_update_or_reason(run.view(SERVER), cid, round_idx)
    if isinstance(got, str):
        return not_applicable(NAME, SERVER, got)
    update, weight = got
    params = model_sent(run.transcript, SERVER, MODEL_TAG, round_idx - 1)
    if params is None:
        return not_applicable(NAME, SERVER, f"the server did not hold the round-{round_idx} model")
    view = run.views[client]
    d, c = view.num_features, view.num_classes
    model = build_model(cfg.model, d, cfg.hidden, c, cfg.layers, cfg.dropout)
    set_flat(model, params.astype(np.float32))
    grads = split_gradient(model, -update / cfg.client_lr)  # one local step: Δ = -lr ∇
    col_scores = first_layer_scores(model, grads, d)
    support = col_scores > 0
    # ground truth: features of the nodes in the training nodes' receptive field
    train = np.flatnonzero(view.train_mask.numpy())
    field = receptive_field(view.edge_index, view.num_nodes, train, cfg.layers)
    x = view.x.numpy().astype(np.float64)
    true_support = (x[field] != 0).any(axis=0)
    sup = support_scores(support, true_support)
    metrics = {"support_auc": roc_auc(col_scores, true_support)}
    metrics.update({f"support_{k}": v for k, v in sup.items()})
    # naive baselines from public statistics (simulated: every node outside the client)
    public = np.ones(run.state.graph.num_nodes, bool)
    public[run.global_nodes(client)] = False
    public_x = run.state.graph.x.numpy()[public].astype(np.float64)
    freq = np.abs(public_x).mean(axis=0)
    guess = support_scores(top_m(freq, int(support.sum())), true_support)
    baselines = {"support_auc": heuristic_auc(freq, true_support)}
    baselines.update({f"support_{k}": v for k, v in guess.items()})
    pos = int(true_support.sum())
    margins = {"support_auc": auc_margin(metrics["support_auc"], pos, d - pos)}
    details: dict = {
        "client": cid,
        "round": round_idx,
        "weight_seen": weight,
        "recovered_support": int(support.sum()),
        "true_support": int(true_support.sum()),
        "local_epochs": cfg.local_epochs,
        "support_f1_predict_all": support_scores(np.ones(d, bool), true_support)["f1"],
    }
    # FedAvg weights by training nodes, so the weight is the batch; DP's uniform weight
    # (1) hides it and the server guesses ``batch_guess`` rows
    batch = int(round(weight)) if weight >= 1.5 else batch_guess
    details["batch_known"] = weight >= 1.5
    binary = bool(np.isin(public_x, (0.0, 1.0)).all())  # the domain, from public rows only
    if support.any() and len(train):
        rec, _ = dlg(model, grads, batch, d, support, steps=steps, binary=binary, seed=seed)
        r, col = match_rows(rec, x[train])
        cos = rowwise_cosine(rec[r], x[train][col])
        metrics["cosine"] = float(cos.mean())
        metrics["mse"] = float(((rec[r] - x[train][col]) ** 2).mean())
        prior = mean_row_guess(public_x, x[train])
        baselines.update(cosine=prior["cosine"], mse=prior["mse"])
        margins["mse"] = DEFAULT_MARGIN * prior["mse"]  # relative: MSE has the data's scale
        if binary:
            rows_f1 = row_support_f1(rec[r] > 0.5, x[train][col] > 0)
            metrics["row_support_f1"] = float(rows_f1.mean())
            baselines["row_support_f1"] = prior["row_support_f1"]
        details.update(dlg_rows=int(batch), dlg_steps=steps)
    # the support attack needs sparse features; with dense ones (as the public rows show)
    # report the DLG cosine
    primary = "support_auc" if not (public_x != 0).any(axis=0).all() else "cosine"
    return AttackResult(NAME, SERVER, metrics, primary, None, details, baselines, margins)
