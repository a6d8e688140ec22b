"""What a client learns about OTHER clients' nodes from the generated neighbour features
its edge server sends it (SpreadFGL / FedGL's repaired-subgraph message, §III-D).

Adversary: client ``i``, holding the last ``spreadfgl/patch`` message it received (rows are
numbered per message: it never learns which node or client a row stands for) and its own
model. The rows ``x̄_v = f(S)_v`` come from an autoencoder trained, per node, to reproduce
``h_v`` (Eq. 10-11): a feature-space proxy of another client's soft prediction.

* ``label_accuracy`` (headline): client ``i`` labels each foreign row with its own model
  (the row as an isolated node); accuracy against the true labels of the foreign nodes.
  Baseline: always guessing the most frequent class of ``i``'s own training labels.
* ``cosine``: the generated row against the foreign node's true features. Baseline:
  ``i``'s own mean feature row (:func:`attacks.naive.mean_row_guess`).

Ground truth (only to score): the server's record of which row it sent stands for which
(client, upload position), the owners' secret row subsets and views.
"""

from __future__ import annotations

import numpy as np
import torch

from attacks.base import AttackResult, not_applicable
from attacks.metrics import rowwise_cosine
from attacks.naive import mean_row_guess, proportion_margin
from attacks.simulation import AuditRun
from securefgl.algorithms.common.edge.model import Features, propagation
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG, read_patch
from securefgl.models import set_flat

NAME = "generated_feature_inference"
ADVERSARY = "client i (each in turn)"


def generated_feature_inference(run: AuditRun) -> AttackResult:
    algo = run.state.algorithm
    servers = getattr(algo, "servers", None)
    if not servers or not getattr(algo, "impute", False):
        return not_applicable(NAME, ADVERSARY, "no generated features in this algorithm")
    guesses, truth, cos, base_cos, prior_hits = [], [], [], [], []
    for cid, client in algo.clients.items():
        server = servers[client.server_id]
        if cid not in server.sent:
            continue
        round_idx, owners, positions = server.sent[cid]
        block = _message(run, cid, round_idx)
        if block is None:
            continue
        me = server.clients.index(cid)
        foreign = owners != me
        if not foreign.any():
            continue
        rows = block.dense() if hasattr(block, "dense") else np.asarray(block)
        rows = rows[foreign]
        true_x, true_y = [], []
        for o, p in zip(owners[foreign], positions[foreign], strict=True):
            owner = algo.clients[server.clients[o]]
            local = owner.h_release.rows[p]
            true_x.append(owner.x_own[local].toarray()[0])
            true_y.append(int(owner.y[local]))
        pred = _classify(client, rows)
        own_train = client.y[client.masks["train"]].numpy()
        prior = int(np.bincount(own_train).argmax()) if len(own_train) else 0
        guesses.append(pred)
        truth.append(np.array(true_y))
        prior_hits.append(np.array(true_y) == prior)
        cos.append(rowwise_cosine(rows, np.array(true_x)))
        base_cos.append(mean_row_guess(client.x_own.toarray(), np.array(true_x))["cosine"])
    if not guesses:
        return not_applicable(NAME, ADVERSARY, "no stored patch with foreign rows")
    g, y = np.concatenate(guesses), np.concatenate(truth)
    acc, base = float((g == y).mean()), float(np.concatenate(prior_hits).mean())
    cosine = float(np.concatenate(cos).mean())
    return AttackResult(
        NAME, ADVERSARY, {"label_accuracy": acc, "cosine": cosine}, "label_accuracy",
        details={"foreign_rows": int(len(y))},
        baselines={"label_accuracy": base, "cosine": float(np.mean(base_cos))},
        margins={"label_accuracy": proportion_margin(base, len(y))},
    )  # fmt: skip


def _message(run: AuditRun, cid: str, round_idx: int):  # noqa: ANN202 - a patch block
    for env in run.view(cid).messages(PATCH_TAG, round=round_idx):
        return read_patch(env.payload)[1]
    return None


@torch.no_grad()
def _classify(client, rows: np.ndarray) -> np.ndarray:  # noqa: ANN001 - an EdgeClient
    """The client's current model on each row as an isolated node."""
    n = len(rows)
    feats = Features(np.zeros((0, rows.shape[1]), np.float32), [rows])
    if client.params is not None:
        set_flat(client.model, client.params)
    client.model.eval()
    prop = propagation(np.zeros((2, 0)), n, client.training.aggregator)
    return client.model(feats, prop).argmax(-1).numpy()
