"""Which domain does each FedVN client hold? Inference from what FedVN shares beyond the
model (Fu et al., AAAI 2025, §4.3: the mean edge-score vectors s_local behind s_global).

Adversary: the honest-but-curious server, reading only what it received (the transcript),
plus public knowledge: the benchmark (GOOD-Motif, Gui et al., NeurIPS 2022; its recipe
gives each domain's expected graph size, :func:`securefgl.data.good_motif.expected_statistics`)
and that each client holds one domain.

Signal: s_local^(k) = mean over the client's graphs of s̃_i = Σ_{v∈G_i} s_v, so its L1 norm
is M × (mean edge score) × (mean nodes per graph): with scores near 0.5 (sigmoid outputs
that SGD at lr 10⁻³ hardly moves) it reads the client's mean graph size. The attack ranks
the clients by ‖s_local‖₁ and the domains by their expected size and matches rank to rank
(domains of equal expected size, e.g. wheel and path, share their ranks: a uniform guess
among them). The same ranking on ‖ΔQ‖ (the client's update of the virtual-node features,
the last M·d entries of a plaintext model update) is the second source.

* plain sums: the server relays every s_local in the clear (it reads them);
* masked / CKKS sums and secure aggregation: the server holds no per-client vector, so every
  client looks the same and the matching is a uniform guess (the receivers learn only the
  mean s_global, which no client can attribute).

Metric: the expected share of clients whose domain is inferred correctly (ties broken
uniformly, in expectation). Naive baseline: a uniform random assignment of the K domains
(expected 1/K); margin: its 95th percentile minus its mean.
"""

from __future__ import annotations

import numpy as np

from attacks.base import SERVER, AttackResult, not_applicable
from attacks.simulation import AuditRun
from protocols.bundles import unbundle
from securefgl.data.good_motif import MOTIF_DATASETS, expected_statistics
from securefgl.data.graph_store import GraphDataset

NAME = "fedvn_domain_inference"
SCORE_TAG = "secure-sum/contribution"
UPDATE_TAG = "plain/update"
#: tags whose payloads the attack needs in every round (the relayed s_local sums)
KEEP_TAGS = (SCORE_TAG,)


def tie_aware_accuracy(statistic: np.ndarray, expected: np.ndarray, truth: np.ndarray) -> float:
    """Expected share of correct matches when the clients sorted by ``statistic`` get the
    domains sorted by ``expected`` position for position; equal values share a block of
    positions, shuffled uniformly, so P(client i gets domain j) = |C_i ∩ D_j| / (|C_i|·|D_j|)
    with C_i, D_j their blocks. ``truth[i]``: client i's domain (an index into ``expected``)."""
    c_lo, c_hi = _blocks(np.asarray(statistic, dtype=np.float64))
    d_lo, d_hi = _blocks(np.asarray(expected, dtype=np.float64))
    j = np.asarray(truth, dtype=np.int64)
    overlap = np.maximum(0, np.minimum(c_hi, d_hi[j]) - np.maximum(c_lo, d_lo[j]))
    return float(np.mean(overlap / ((c_hi - c_lo) * (d_hi[j] - d_lo[j]))))


def _blocks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's block [lo, hi) of positions in the sorted order (ties share one)."""
    lo = (x[None, :] < x[:, None]).sum(1)
    return lo, lo + (x[None, :] == x[:, None]).sum(1)


def random_assignment_null(k: int, draws: int = 20000) -> tuple[float, float]:
    """(mean, 95th percentile) of the share of fixed points of a uniform permutation of k."""
    rng = np.random.default_rng(48)
    perms = np.argsort(rng.random((draws, k)), axis=1)
    shares = (perms == np.arange(k)).mean(1)
    return float(shares.mean()), float(np.quantile(shares, 0.95))


def client_domains(data: GraphDataset, assignment: np.ndarray, k: int) -> np.ndarray:
    """GROUND TRUTH: the domain of each client's graphs (scoring only)."""
    assert data.domain is not None
    return np.array([np.bincount(data.domain[assignment == i]).argmax() for i in range(k)])


def _scores(run: AuditRun, ids: list[str]) -> dict[str, np.ndarray]:
    """Each client's relayed s_local, averaged over the rounds whose payloads were kept:
    only plain sums carry it in the clear (field ``values``)."""
    seen: dict[str, list[np.ndarray]] = {}
    for e in run.view(SERVER).entries:
        if e.tag != SCORE_TAG or e.data is None or e.sender not in ids:
            continue
        for part in unbundle(e.payload(), "audit").values():
            if "values" in part:
                seen.setdefault(e.sender, []).append(part.array("values"))
    return {c: np.mean(v, axis=0) for c, v in seen.items()}


def _q_updates(run: AuditRun, ids: list[str], q_size: int) -> dict[str, np.ndarray]:
    """Each client's plaintext ΔQ (the last ``q_size`` entries of its weighted update,
    divided by the weight it declared), from the earliest kept round."""
    kept = [e for e in run.view(SERVER).entries
            if e.tag == UPDATE_TAG and e.data is not None and e.sender in ids]  # fmt: skip
    if not kept:
        return {}
    first = min(e.round for e in kept)
    out = {}
    for e in kept:
        if e.round == first:
            p = e.payload()
            out[e.sender] = p.array("weighted")[-q_size:] / float(p.meta.get("weight", 1.0))
    return out


def fedvn_domain_inference(run: AuditRun) -> AttackResult:
    data = run.state.graph
    kind = MOTIF_DATASETS.get(str(run.config.dataset).lower())
    if not isinstance(data, GraphDataset) or data.domain is None or kind is None:
        return not_applicable(NAME, SERVER, "scored on GOOD-Motif (one domain per client)")
    ids = [f"client-{v.client_id}" for v in run.views]
    k = len(ids)
    truth = client_domains(data, np.asarray(run.state.assignment), k)
    expected = np.array([s["nodes"] for s in expected_statistics(kind)])
    fedvn = run.config.sections.get("fedvn")
    vns = int(getattr(fedvn, "virtual_nodes", 20))
    hidden = int(run.config.sections["graph"].hidden)
    scores, updates = _scores(run, ids), _q_updates(run, ids, vns * hidden)
    metrics: dict[str, float] = {}
    sources = {}
    if set(scores) == set(ids):
        stat = np.array([np.abs(scores[c]).sum() for c in ids])
        metrics["domain_accuracy_scores"] = tie_aware_accuracy(stat, expected, truth)
        sources["scores"] = stat.round(4).tolist()
    if set(updates) == set(ids):
        stat = np.array([np.linalg.norm(updates[c]) for c in ids])
        metrics["domain_accuracy_q"] = tie_aware_accuracy(stat, expected, truth)
        sources["q_update_norms"] = stat.round(6).tolist()
    if "domain_accuracy_scores" in metrics:
        source, value = "plaintext s_local (relayed sums)", metrics["domain_accuracy_scores"]
    elif "domain_accuracy_q" in metrics:
        source, value = "plaintext ΔQ (model updates)", metrics["domain_accuracy_q"]
    else:  # nothing per client: every client looks the same, a uniform guess
        source = "no per-client vector (secure sums / secure aggregation): uniform guess"
        value = tie_aware_accuracy(np.zeros(k), expected, truth)
    metrics["domain_accuracy"] = value
    mean, q95 = random_assignment_null(k)
    result = AttackResult(NAME, SERVER, metrics, "domain_accuracy")
    result.baselines["domain_accuracy"], result.margins["domain_accuracy"] = mean, q95 - mean
    result.details.update(
        source=source, clients=k, domains=[data.domain_names[d] for d in truth],
        expected_nodes=expected.round(2).tolist(), **sources,
    )  # fmt: skip
    return result
