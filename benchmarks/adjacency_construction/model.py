"""The cost model of a federated Ā build (time, bytes, peak memory from the partition's
structure and the fill-in of ``Â^ℓ``; constants fitted on the 2-vCPU machine) and the guard
that aborts a running cell projected past its budget."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from benchmarks.harness.system import GIB, rss_bytes
from securefgl.algorithms.fedstruct.abar_build import HopContext, HopSum
from securefgl.algorithms.fedstruct.abar_central import keep_top_values, normalized_adjacency

SLACK = 1.25  # the in-run guard aborts past SLACK x the cell budget

FEDERATED_REPEAT_BELOW_S = 5.0  # cells estimated below this run 3 times (best of 3)
CENTRAL_REPEAT = 10  # central references estimated under 0.5 s: best of 10

# cost model constants for the 2-vCPU box. plain and dense (rows-support) masked: measured
# on single runs, conservative (0.9-6.5x the measured CPU time of rows cells). union
# support: a least-squares fit (relative error) to the 56 measured union-support masked /
# ckks cells, times 1.5 so that estimates err high (0.5-2.1x measured);
# the constants are a fit, not per-operation costs
PLAIN_S_PER_ENTRY = 80e-9  # serialise + relay + sum, per B_ik entry
PLAIN_S_PER_MESSAGE = 0.4e-3  # per relayed block (two messages per client pair and hop)
DENSE_S_PER_VALUE = 45e-9  # rows support: gather, encode, serialise, add, unmask per value
DENSE_S_PER_MASK = 9e-9  # rows support: mask words (|S_i| masks per value)
MASKED_S_PER_VALUE = 24e-9  # union support: the same per encoded value
MASKED_S_PER_MASK = 1.0e-9  # union support: mask words
UNION_S_PER_ENTRY = 31e-9  # patterns, union, support decoding (per pattern entry)
JOB_S = 80e-6  # per (receiver, sender) pair and hop in a secure sum: seeds, messages
CKKS_S_PER_CT = 2.1e-3  # encrypt + serialise + server load/add, per 2048-value ciphertext
CKKS_S_PER_SUM_CT = 0.5e-3  # receiver load + decrypt + round, per delivered ciphertext
CKKS_CT_BYTES = 65_700
CENTRAL_S_PER_FLOP = 12e-9


def row_fill(a_hat: sp.csr_matrix, hops: int, sample: int, seed: int) -> list[float]:
    """Mean nnz per row of ``Â^ℓ``, ℓ = 0..hops, from ``sample`` random rows."""
    n = a_hat.shape[0]
    rng = np.random.default_rng(seed)
    rows = rng.choice(n, size=min(sample, n), replace=False)
    x = sp.csr_matrix((np.ones(rows.size), (np.arange(rows.size), rows)), shape=(rows.size, n))
    out = [1.0]
    for _ in range(hops):
        if out[-1] >= n:
            out.append(float(n))
            continue
        x = sp.csr_matrix(x @ a_hat)
        out.append(x.nnz / rows.size)
    return out


def pruned_fill(a_hat: sp.csr_matrix, hops: int, p: float) -> list[float]:
    """Mean nnz per row of ``Â·P^{ℓ-1}`` BEFORE pruning, ℓ = 0..hops, where ``P^{ℓ-1}`` is
    the pruned chain of ``central_abar`` (global top ``⌈p·n⌉``): the width of a pruned
    cell's summed rows, which overlapping neighbours keep far below ``deg·p``."""
    n = a_hat.shape[0]
    out, pm = [1.0], sp.identity(n, dtype=np.float64, format="csr")
    for _ in range(hops):
        pm = sp.csr_matrix(a_hat @ pm)
        out.append(pm.nnz / n)
        pm = keep_top_values(pm, math.ceil(p * n))
    return out


@dataclass
class Structure:
    """Simulator-side sizes of one partition (for the cost model only)."""

    n: int
    sizes: np.ndarray  # n_i
    boundary: np.ndarray  # |R_i|
    senders: list[list[int]]  # neighbouring clients of i
    rows_ik: dict[tuple[int, int], int]  # |R_ik|: i's nodes adjacent to k
    edges_ik: dict[tuple[int, int], int]  # cross edges (u in i, v in k)

    @classmethod
    def of(cls, edge_index: np.ndarray, assignment: np.ndarray, K: int) -> Structure:
        n = assignment.size
        a = sp.csr_matrix(normalized_adjacency(edge_index, n) > 0)
        coo = a.tocoo()
        cross = assignment[coo.row] != assignment[coo.col]
        u, v = coo.row[cross], coo.col[cross]
        ci, ck = assignment[u], assignment[v]
        sizes = np.bincount(assignment, minlength=K)
        boundary = np.bincount(assignment[np.unique(u)], minlength=K)
        pair = ci * K + ck
        edges = np.bincount(pair, minlength=K * K)
        rows = np.bincount(np.unique(pair * n + u) // n, minlength=K * K)
        senders = [[k for k in range(K) if edges[i * K + k]] for i in range(K)]
        e_ik = {(i, k): int(edges[i * K + k]) for i in range(K) for k in senders[i]}
        r_ik = {(i, k): int(rows[i * K + k]) for i in range(K) for k in senders[i]}
        return cls(n, sizes, boundary, senders, r_ik, e_ik)


@dataclass
class Estimate:
    seconds: float
    bytes: float
    peak_bytes: float
    per_hop: list[float]  # estimated seconds of hops 2..L


def estimate(
    st: Structure,
    fill: list[float],
    hops: int,
    mode: str,
    support: str | None,
    p: float | None,
    fill_pruned: list[float] | None = None,
) -> Estimate:
    """Rough time, bytes and peak memory of one federated build (model in the module doc;
    ``fill_pruned``: :func:`pruned_fill`, bounds the summed rows of pruned cells)."""
    n, K = st.n, len(st.sizes)
    fill_p = [min(f, p) if p is not None else f for f in fill]  # pruned rows keep ~p entries
    width = fill_pruned if p is not None and fill_pruned is not None else fill
    total_s, total_b, peak, per_hop = 0.0, 0.0, 0.0, []
    if mode != "plain" and hops > 1:  # key setup
        total_b += K * K * (120_000 if mode == "ckks" else 40)
        total_s += K * (0.02 if mode == "ckks" else 0.001)
    for hop in range(2, hops + 1):
        nnz_b = {
            key: min(r * n, r * fill[hop], st.edges_ik[key] * fill_p[hop - 1])
            for key, r in st.rows_ik.items()
        }
        ent = sum(nnz_b.values())
        state = sum(st.sizes) * fill_p[hop] * 12 * 3  # P and Ā at the clients
        s = b = mem = 0.0
        if mode == "plain":
            s = ent * PLAIN_S_PER_ENTRY + 2 * len(nnz_b) * PLAIN_S_PER_MESSAGE
            b, mem = 2 * 16 * ent, 6 * 16 * ent
        else:
            for i in range(K):
                senders = st.senders[i]
                if not senders:
                    continue
                dense = st.boundary[i] * n
                if support == "rows":
                    length = dense
                else:
                    length = min(
                        dense, st.boundary[i] * width[hop], sum(nnz_b[i, k] for k in senders)
                    )
                    pat = sum(nnz_b[i, k] for k in senders)
                    idx_bytes = 4 if n * n < 2**32 else 8  # flat indices on the wire
                    sup = min(idx_bytes * length, n * n / 8)
                    s += pat * UNION_S_PER_ENTRY + length * UNION_S_PER_ENTRY * (len(senders) + 1)
                    b += idx_bytes * pat + sup * (len(senders) + 2)
                    mem += 16 * pat + sup * (len(senders) + 2)
                v = length * len(senders)
                s += JOB_S * len(senders)
                if mode == "masked":
                    per_value, per_mask = (
                        (DENSE_S_PER_VALUE, DENSE_S_PER_MASK)
                        if support == "rows"
                        else (MASKED_S_PER_VALUE, MASKED_S_PER_MASK)
                    )
                    s += v * (per_value + per_mask * len(senders))
                    b += 8 * (v + length)
                    mem += 40 * v + 8 * length * 3
                else:
                    cts = math.ceil(length / 2048)
                    s += cts * (len(senders) * CKKS_S_PER_CT + CKKS_S_PER_SUM_CT)
                    b += CKKS_CT_BYTES * cts * (len(senders) + 1)
                    mem += 3 * CKKS_CT_BYTES * cts * len(senders) + 8 * length * 4
        per_hop.append(s)
        total_s += s
        total_b += b
        peak = max(peak, mem + state)
    return Estimate(total_s, total_b, peak, per_hop)


def central_estimate(n: int, fill: list[float], hops: int, p: float | None, deg: float) -> tuple:
    """(seconds, peak bytes) of ``central_abar``: sparse products Â·P, ``n·fill`` entries."""
    fp = [min(f, p) if p is not None else f for f in fill]
    flops = sum(n * fp[h - 1] * deg for h in range(1, hops + 1))
    peak = max(n * min(fill[h], fp[h - 1] * deg) for h in range(1, hops + 1)) * 12 * 4
    return flops * CENTRAL_S_PER_FLOP, peak


class OverBudgetError(RuntimeError):
    pass


class Guarded(HopSum):
    """Runs ``inner`` but aborts between hops once the projected total exceeds
    ``SLACK x budget`` (projection: the model's estimates of the remaining hops, scaled by
    measured / estimated time of the hops done). A safety net for runaway cells: the
    pre-run estimate already kept cells over the budget out."""

    name = "guarded"

    def __init__(self, inner: HopSum, budget: float, est_per_hop: list[float], mem: float):
        self.inner, self.budget, self.est, self.mem = inner, budget, est_per_hop, mem
        self.t0 = time.perf_counter()
        self.done: list[tuple[int, float]] = []

    def run_hop(self, hop: int, ctx: HopContext) -> None:
        now = time.perf_counter()
        if self.done:
            est_done = sum(self.est[h - 2] for h, _ in self.done)
            factor = sum(t for _, t in self.done) / max(est_done, 1e-6)
            projected = now - self.t0 + factor * sum(self.est[hop - 2 :])
            if projected > SLACK * self.budget:
                raise OverBudgetError(
                    f"aborted before hop {hop}: {now - self.t0:.0f}s spent, projected "
                    f"{projected:.0f}s > {SLACK} x budget {self.budget:.0f}s"
                )
        if (rss_bytes() or 0) > self.mem:
            raise OverBudgetError(
                f"aborted before hop {hop}: RSS {(rss_bytes() or 0) / GIB:.1f} GiB"
            )
        t = time.perf_counter()
        self.inner.run_hop(hop, ctx)
        self.done.append((hop, time.perf_counter() - t))

    def hop_notes(self, hop: int) -> dict[str, int]:
        return self.inner.hop_notes(hop)
