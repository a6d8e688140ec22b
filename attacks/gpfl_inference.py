"""What GPFL's server learns about each client's data (TMLR 2025; the GPFL README).

Adversary: the honest-but-curious server, reading only what it received (the transcript).

* :func:`property_inference`: the client's dataset statistics (the six graph properties,
  averaged over its training graphs). Plain GPFL sends them (the rule-based selector needs
  them); with ``property_epsilon`` they arrive through Laplace LDP. Metric: the mean over
  properties of the Pearson correlation between the server's reading and the truth across
  clients.
* :func:`label_distribution_inference`: each client's share of class 1 in its training
  set (binary tasks). From a plaintext update, the readout bias moves towards the client's
  label prior (Δb₁ − Δb₀); from plaintext features, the functional embedding's mean class-1
  probability on the probes; when the server holds only the k×k cosine matrices (secure
  GPFL), the leading eigenvector of the centred functional-embedding similarity orders the
  clients (its sign is unknown, hence |ρ|). Metric: |Spearman ρ| across clients (the
  server ranks clients by label skew; it would need one anchor client to calibrate).

Naive baseline of both: the expected |correlation| of a guess independent of the truth
(a random permutation, k clients), margin: its 95th percentile minus that mean.
"""

from __future__ import annotations

import numpy as np

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.simulation import AuditRun
from protocols.wire import Payload
from securefgl.algorithms.gpfl.properties import NAMES, client_properties


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) < 1e-12 or np.std(b) < 1e-12:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def null_abs_corr(k: int, spearman: bool, draws: int = 4000) -> tuple[float, float]:
    """(mean, 95th percentile) of |correlation| between k values and an independent guess."""
    rng = np.random.default_rng(12345)
    truth = np.arange(k, dtype=np.float64)
    vals = []
    for _ in range(draws):
        guess = rng.permutation(k).astype(np.float64) if spearman else rng.normal(size=k)
        vals.append(abs(_corr(truth, guess)))
    return float(np.mean(vals)), float(np.quantile(vals, 0.95))


def _clients(run: AuditRun) -> list[str]:
    return [f"client-{v.client_id}" for v in run.views]


def _last(run: AuditRun, tag: str) -> dict[str, Payload]:
    """The payloads of ``tag`` the server received in the last round whose payloads the
    transcript kept, by sender."""
    kept = [e for e in run.view(SERVER).entries if e.tag == tag and e.data is not None]
    if not kept:
        return {}
    last = max(e.round for e in kept)
    return {e.sender: e.payload() for e in kept if e.round == last}


def property_inference(run: AuditRun) -> AttackResult:
    seen = _last(run, "gpfl/properties")
    ids = _clients(run)
    if set(seen) != set(ids):
        return not_applicable("property_inference", SERVER,
                              "no property vectors reached the server (random A_0)")  # fmt: skip
    guess = np.stack([seen[c].array("properties") for c in ids])
    truth = np.stack([client_properties(v.dataset(v.train_mask)) for v in run.views])
    per = {NAMES[p]: _corr(guess[:, p], truth[:, p]) for p in range(len(NAMES))}
    value = float(np.mean(list(per.values())))
    mean, q95 = null_abs_corr(len(ids), spearman=False)
    result = AttackResult("property_inference", SERVER, {"pearson": value}, "pearson")
    result.baselines["pearson"], result.margins["pearson"] = mean, q95 - mean
    result.details.update(per_property=per, clients=len(ids),
                          epsilon=run.result.privacy.get("epsilon"))  # fmt: skip
    return result


def _readout_bias_delta(update: np.ndarray, num_classes: int) -> np.ndarray:
    """The readout bias is the last ``num_classes`` parameters of the flat GIN vector."""
    return update[-num_classes:]


def label_distribution_inference(run: AuditRun) -> AttackResult:
    views = run.views
    if views[0].num_classes != 2:
        return not_applicable("label_distribution_inference", SERVER,
                              "scored on binary tasks (class-1 share)")  # fmt: skip
    ids = _clients(run)
    truth = np.array([float(v.y[v.train_mask].float().mean()) for v in views])
    updates, features = _last(run, "gpfl/update"), _last(run, "gpfl/features")
    grams = list(_last(run, "gram/matrices").values())
    if set(updates) == set(ids):
        source = "plaintext updates: readout-bias step Δb1 − Δb0"
        score = np.array([np.diff(_readout_bias_delta(updates[c].array("delta"), 2))[0]
                          for c in ids])  # fmt: skip
    elif set(features) == set(ids):
        source = "plaintext functional embeddings: mean class-1 probability on the probes"
        score = np.array([np.exp(features[c].array("embedding").reshape(-1, 2)[:, 1]).mean()
                          for c in ids])  # fmt: skip
    elif grams:
        source = "k×k embedding cosine matrix only: leading eigenvector (sign unknown)"
        g = grams[-1].array("embedding")
        vals, vecs = np.linalg.eigh((g + g.T) / 2)
        score = vecs[:, -1]
    else:
        return not_applicable("label_distribution_inference", SERVER,
                              "the server received neither updates nor similarities")  # fmt: skip
    rho = abs(_corr(_ranks(score), _ranks(truth)))
    mean, q95 = null_abs_corr(len(ids), spearman=True)
    result = AttackResult("label_distribution_inference", SERVER, {"abs_spearman": rho},
                          "abs_spearman")  # fmt: skip
    result.baselines["abs_spearman"], result.margins["abs_spearman"] = mean, q95 - mean
    result.details.update(source=source, clients=len(ids),
                          truth_spread=float(truth.std()))  # fmt: skip
    return result
