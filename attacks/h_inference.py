"""What an edge server infers from its clients' soft-prediction uploads H (SpreadFGL, FedGL).

Adversary: edge server ``edge-j``, reading the ``spreadfgl/h`` uploads of each of its
clients (every node's softmax row, test and unlabelled nodes included: Zhong et al.,
Eq. 9). It holds no features, edges or labels of the client. Label inference votes across
every upload it saw; link and membership inference read the last one. Rows the
client never uploads (``h_rows < 1``) get the server's uninformed guess: a constant score
for link and membership inference, the most frequent uploaded class for labels.

* :func:`h_link_inference`: score a pair of the client's nodes by ``h_u · h_v`` (the very
  signal the paper builds potential links from); ROC AUC over the client's true internal
  edges and as many sampled non-edges, pooled over clients. Baseline: chance (0.5).
* :func:`h_label_inference`: ``argmax_c Σ_uploads h_vc`` on the client's unlabelled nodes
  (everything but its training nodes), the last upload breaking ties; accuracy. Under
  randomised response (one-hot rows, the same ε each upload) the sum is a majority vote,
  which is the maximum-likelihood guess; on soft rows it averages the uploads' predictions.
  Baseline: always guessing the most frequent class among those nodes (a server knowing
  the class prior), with a binomial margin.
* :func:`h_membership`: is ``v`` a training node? Signal ``max_c h_vc`` (label-free);
  AUC of training vs test nodes. Baseline: chance.

Ground truth (used only to score): the clients' views and each client's secret row
subset, from the simulator state.
"""

from __future__ import annotations

import numpy as np

from attacks.base import AttackResult, not_applicable
from attacks.metrics import roc_auc
from attacks.naive import CHANCE_AUC, auc_margin, proportion_margin
from attacks.pairs import sample_pairs
from attacks.simulation import AuditRun, undirected_adjacency
from securefgl.algorithms.spreadfgl.client import H_TAG

LINK, LABEL, MEMBER = "h_link_inference", "h_label_inference", "h_membership"
ADVERSARY = "edge server"
MAX_PAIRS = 4000


def uploads(
    run: AuditRun, every: bool = False
) -> list[tuple[object, np.ndarray, np.ndarray]] | str:
    """Per client ``(client party, full-size H as the server sees it, uploaded mask)``;
    rows not uploaded are NaN. H is the last upload, or with ``every`` all of them stacked
    (uploads × nodes × classes). A reason string when nothing was uploaded or stored."""
    algo = run.state.algorithm
    clients = getattr(algo, "clients", None)
    if not clients or not getattr(algo, "impute", False):
        return "no H uploads in this algorithm"
    out = []
    for cid, client in clients.items():
        seen = [env.payload.array("h") for env in run.view(client.server_id).messages(H_TAG)
                if env.sender == cid]  # fmt: skip
        if not seen:
            continue
        rows = client.h_release.rows  # ground truth: which local node each row is
        kept = seen if every else seen[-1:]
        h = np.full((len(kept), client.num_own, seen[-1].shape[1]), np.nan)
        h[:, rows] = np.stack(kept)
        mask = np.zeros(client.num_own, bool)
        mask[rows] = True
        out.append((client, h if every else h[0], mask))
    return out or "no stored H upload (keep the spreadfgl/h payloads)"


def h_link_inference(run: AuditRun, seed: int = 0) -> AttackResult:
    data = uploads(run)
    if isinstance(data, str):
        return not_applicable(LINK, ADVERSARY, data)
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for client, h, mask in data:
        adj = undirected_adjacency(client.edges, client.num_own)
        pairs, y = sample_pairs(adj, MAX_PAIRS, rng)
        if not len(pairs):
            continue
        s = np.nansum(h[pairs[:, 0]] * h[pairs[:, 1]], axis=1)
        known = mask[pairs[:, 0]] & mask[pairs[:, 1]]
        s[~known] = np.median(s[known]) if known.any() else 0.0  # no information: a constant
        scores.append(s)
        labels.append(y)
    if not scores:
        return not_applicable(LINK, ADVERSARY, "no client has an internal edge")
    s, y = np.concatenate(scores), np.concatenate(labels)
    auc = roc_auc(s, y)
    pos, neg = int(y.sum()), int((~y).sum())
    return AttackResult(
        LINK, ADVERSARY, {"auc": auc}, "auc",
        details={"pairs": int(len(y)), "uploaded_fraction": _uploaded(data)},
        baselines={"auc": CHANCE_AUC}, margins={"auc": auc_margin(auc, pos, neg)},
    )  # fmt: skip


def h_label_inference(run: AuditRun) -> AttackResult:
    data = uploads(run, every=True)
    if isinstance(data, str):
        return not_applicable(LABEL, ADVERSARY, data)
    guesses, truth, counts = [], [], []
    for client, hs, mask in data:
        target = ~client.masks["train"].numpy()  # the nodes whose labels the client keeps
        votes = np.nansum(hs, axis=0) + 1e-6 * np.nan_to_num(hs[-1])  # ties: the last upload
        pred = np.where(mask, votes.argmax(axis=1), -1)
        counts.append(len(hs))
        prior = np.bincount(pred[pred >= 0]).argmax() if (pred >= 0).any() else 0
        pred[pred < 0] = prior  # a row never uploaded: the server's most frequent class
        guesses.append(pred[target])
        truth.append(client.y.numpy()[target])
    g, y = np.concatenate(guesses), np.concatenate(truth)
    acc = float((g == y).mean())
    base = float(np.bincount(y).max() / len(y))
    return AttackResult(
        LABEL, ADVERSARY, {"accuracy": acc}, "accuracy",
        details={"nodes": int(len(y)), "uploaded_fraction": _uploaded(data),
                 "uploads": max(counts)},
        baselines={"accuracy": base}, margins={"accuracy": proportion_margin(base, len(y))},
    )  # fmt: skip


def h_membership(run: AuditRun) -> AttackResult:
    data = uploads(run)
    if isinstance(data, str):
        return not_applicable(MEMBER, ADVERSARY, data)
    scores, member = [], []
    for client, h, mask in data:
        keep = (client.masks["train"] | client.masks["test"]).numpy()
        s = np.nanmax(np.where(mask[:, None], h, -np.inf), axis=1)
        s[~mask] = np.median(s[mask]) if mask.any() else 0.0
        scores.append(s[keep])
        member.append(client.masks["train"].numpy()[keep])
    s, y = np.concatenate(scores), np.concatenate(member)
    auc = roc_auc(s, y)
    return AttackResult(
        MEMBER, ADVERSARY, {"auc": auc}, "auc",
        details={"members": int(y.sum()), "non_members": int((~y).sum())},
        baselines={"auc": CHANCE_AUC},
        margins={"auc": auc_margin(auc, int(y.sum()), int((~y).sum()))},
    )  # fmt: skip


def _uploaded(data: list) -> float:
    return float(np.mean(np.concatenate([m for _, _, m in data])))
