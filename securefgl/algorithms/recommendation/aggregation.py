"""Server-side aggregation of the users' uploads, in the clear or under secure aggregation.

Aggregate (FeSoG's ``server.py::aggregator``, also used for FedGNN with weight 1): item rows
Σ_u w_u g_{u,i} / #{u returning i}; user rows Σ_u a_u g_{u,v} / Σ_{u returning v} a_u; model
parameters Σ_u a_u g_u / Σ_u a_u; then SGD with weight decay on the touched rows and the
parameters (:func:`server_update`). FeSoG's aggregator averages with a_u = w_u (the user's
ratings + pseudo items); ``Uploads.average_weight`` = 1 makes the averages uniform (FeSoG's
default under a secure aggregation): a user row's count w-weighted would be a subset sum of
the cohort's weights, which a small cohort's distinct weights decode, in a single round, into
who links to whom. Uniform averages close only that single-round decoding. Across rounds a
user-row count still says how many cohort members uploaded the row, which names the links
when users upload their neighbours' rows (:mod:`attacks.row_counts`; FeSoG's
``social_rows = own``, the default under a secure aggregation, uploads only the user's own
row); a round's item-row counts sum to the cohort's Σ w_u, a linear system over the cohorts
in the users' rating counts, and the item support of the rounds a user joined narrows down
its rated items (not closed: the family's README, "What the counts reveal"). Backends:

* ``plain`` — the server sees every user's sparse upload (:class:`ServerView` ``per_user``);
* ``ckks`` / ``secagg`` / ``secagg+`` — the real protocols, one client per user, twice per
  round: a secure sum of row indicators gives the per-row counts and so the support
  (:func:`secure_support`), then a secure sum of the weighted rows over that support; the
  server learns the cohort's ids, the sums and the counts, no user's row set directly
  (with uniform averages every count is a number of cohort users and the weight total is
  the cohort's size; across rounds the counts still reveal more, above);
* ``ideal`` — the ideal functionality of secure aggregation (the same sums in one tensor
  program, checked against the protocols), for long runs.

Costs and details: ``securefgl/algorithms/recommendation/README.md``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from protocols.base import AggregationProtocol, aggregate, setup_parties
from protocols.registry import make_transport
from protocols.wire import Payload
from securefgl.algorithms.recommendation.row_dp import (
    RowDPConfig,
    keep_items,
    shares,
    support_of,
)
from securefgl.algorithms.recommendation.uploads import Uploads
from securefgl.federation.audit import max_abs_error
from securefgl.federation.channel import Channel
from securefgl.federation.transcript import Transcript

#: how the server aggregates: in the clear, by the ideal functionality of secure
#: aggregation (the same sums in one tensor program), or by a secure transport
AGGREGATIONS: tuple[str, ...] = ("plain", "ideal", "ckks", "secagg", "secagg+")


@dataclass
class AggregateSums:
    item_idx: torch.Tensor
    item_sum: torch.Tensor
    item_count: torch.Tensor
    user_idx: torch.Tensor
    user_sum: torch.Tensor
    user_count: torch.Tensor
    model_sum: dict[str, torch.Tensor]
    weight_sum: float


@dataclass
class ServerView:
    """What the server received in one round."""

    round: int
    aggregation: str
    users: np.ndarray  # the round's participants (the server always knows them)
    per_user: Uploads | None = None  # plain: each user's upload (item_pseudo is not sent)
    sums: AggregateSums | None = None
    bytes_up: int = 0
    extra: dict[str, float] = field(default_factory=dict)


def _row_sums(
    slot: torch.Tensor, idx: torch.Tensor, grad: torch.Tensor, w: torch.Tensor, count_w: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    uniq, inv = torch.unique(idx, return_inverse=True)
    s = grad.new_zeros(uniq.numel(), grad.shape[1]).index_add(0, inv, grad * w[slot].unsqueeze(1))
    c = grad.new_zeros(uniq.numel()).index_add(
        0, inv, w[slot] if count_w else torch.ones_like(inv, dtype=grad.dtype)
    )
    return uniq, s, c


def plain_sums(up: Uploads) -> AggregateSums:
    """The aggregate computed from plaintext uploads (reference for every aggregation)."""
    w, a = up.weight.float(), up.averaging_weight().float()
    ii, isum, icnt = _row_sums(up.item_slot, up.item_idx, up.item_grad, w, count_w=False)
    if up.user_grad.numel():
        ui, usum, ucnt = _row_sums(up.user_slot, up.user_idx, up.user_grad, a, count_w=True)
    else:
        ui, usum, ucnt = torch.zeros(0, dtype=torch.long), torch.zeros(0, 0), torch.zeros(0)
    model = {k: (v * a.view(-1, *([1] * (v.dim() - 1)))).sum(0) for k, v in up.model.items()}
    return AggregateSums(ii, isum, icnt, ui, usum, ucnt, model, float(a.sum()))


def noisy_ideal_sums(
    up: Uploads, n_items: int, dp: tuple[RowDPConfig, np.random.Generator]
) -> AggregateSums:
    """The ideal functionality of both phases under :mod:`.row_dp`: the noise is the sum of
    the members' shares, drawn at once (the same distribution)."""
    cfg, rng = dp
    counts = torch.zeros(n_items, dtype=torch.float64).index_add_(
        0, up.item_idx, torch.ones(up.item_idx.numel(), dtype=torch.float64)
    )
    noisy = (counts + torch.from_numpy(rng.normal(0.0, cfg.count_std, n_items))).float()
    ii = support_of(noisy, cfg)
    s = plain_sums(keep_items(up, torch.isin(up.item_idx, ii)))
    d = up.item_grad.shape[1] if up.item_grad.dim() == 2 else 0
    isum = torch.zeros(ii.numel(), d).index_copy_(0, torch.searchsorted(ii, s.item_idx), s.item_sum)

    def noised(t: torch.Tensor, part: str) -> torch.Tensor:
        noise = rng.normal(0.0, cfg.sum_std(part), tuple(t.shape))
        return t + torch.from_numpy(noise).to(t.dtype)

    model = {k: noised(v, "model") for k, v in s.model_sum.items()}
    return AggregateSums(ii, noised(isum, "items"), noisy[ii], s.user_idx,
                         noised(s.user_sum, "users"), s.user_count, model,
                         s.weight_sum)  # fmt: skip


def _dense_vectors(up: Uploads, sums: AggregateSums) -> np.ndarray:
    """Each user's weighted upload scattered over the support (phase 1): [B, D]."""
    b = up.n
    d = up.item_grad.shape[1]
    w, a = up.weight.double(), up.averaging_weight().double()
    ni, nu = sums.item_idx.numel(), sums.user_idx.numel()
    mdim = sum(v[0].numel() for v in up.model.values())
    D = ni * (d + 1) + nu * (d + 1) + mdim + 1
    X = torch.zeros(b, D, dtype=torch.float64)
    pos = torch.searchsorted(sums.item_idx, up.item_idx)
    cols = pos.unsqueeze(1) * d + torch.arange(d)
    X[up.item_slot.unsqueeze(1).expand_as(cols), cols] = up.item_grad.double() * w[
        up.item_slot
    ].unsqueeze(1)
    X[up.item_slot, ni * d + pos] = 1.0
    off = ni * (d + 1)
    if nu:
        pos = torch.searchsorted(sums.user_idx, up.user_idx)
        cols = off + pos.unsqueeze(1) * d + torch.arange(d)
        X[up.user_slot.unsqueeze(1).expand_as(cols), cols] = up.user_grad.double() * a[
            up.user_slot
        ].unsqueeze(1)
        X[up.user_slot, off + nu * d + pos] = a[up.user_slot]
    off += nu * (d + 1)
    flat = torch.cat([v.reshape(b, -1).double() for v in up.model.values()], 1) * a.unsqueeze(1)
    X[:, off : off + mdim] = flat
    X[:, -1] = a
    return X.numpy()


def _dense_columns(up: Uploads, support: AggregateSums) -> dict[str, slice]:
    """Where each part lies in :func:`_dense_vectors`' columns: the sums of the item rows,
    user rows and model (what :mod:`.row_dp` noises) and the item rows' counts."""
    d = up.item_grad.shape[1]
    ni, nu = support.item_idx.numel(), support.user_idx.numel()
    users = ni * (d + 1)
    model = users + nu * (d + 1)
    mdim = sum(v[0].numel() for v in up.model.values())
    return {"items": slice(0, ni * d), "item_counts": slice(ni * d, users),
            "users": slice(users, users + nu * d), "model": slice(model, model + mdim)}  # fmt: skip


def _parse_dense(total: np.ndarray, up: Uploads, support: AggregateSums) -> AggregateSums:
    d = up.item_grad.shape[1]
    t = torch.from_numpy(total).float()
    ni, nu = support.item_idx.numel(), support.user_idx.numel()
    isum = t[: ni * d].view(ni, d)
    icnt = t[ni * d : ni * (d + 1)]
    off = ni * (d + 1)
    usum = t[off : off + nu * d].view(nu, d)
    ucnt = t[off + nu * d : off + nu * (d + 1)]
    off += nu * (d + 1)
    model = {}
    for k, v in up.model.items():
        n = v[0].numel()
        model[k] = t[off : off + n].view(v.shape[1:])
        off += n
    return AggregateSums(
        support.item_idx,
        isum,
        icnt.round(),
        support.user_idx,
        usum if nu else torch.zeros(0, 0),
        ucnt,
        model,
        float(t[-1]),
    )


#: a transport's options as they travel to the aggregator (JSON): ``threat_model``,
#: ``threshold`` (Shamir t) and ``neighbours`` (secagg+ degree), as :func:`make_transport`
TransportOptions = dict[str, Any]


def users_transport(
    name: str, experiment_id: str, options: TransportOptions
) -> AggregationProtocol:
    """The transport among one cohort's users (fresh keys per protocol run)."""
    return make_transport(name, experiment_id, **options)


def support_indicators(up: Uploads, n_items: int, n_users: int) -> np.ndarray:
    """Each user's phase-1 input, [B, n_items + n_users]: 1 on the item rows it uploads,
    its averaging weight on the user rows (the count definitions of :func:`plain_sums`)."""
    if up.item_idx.numel() and int(up.item_idx.max()) >= n_items:
        raise ValueError(f"item row {int(up.item_idx.max())} outside the table of {n_items}")
    if up.user_idx.numel() and int(up.user_idx.max()) >= n_users:
        raise ValueError(f"user row {int(up.user_idx.max())} outside the table of {n_users}")
    X = torch.zeros(up.n, n_items + n_users, dtype=torch.float64)
    X[up.item_slot, up.item_idx] = 1.0
    if up.user_idx.numel():
        X[up.user_slot, n_items + up.user_idx] = up.averaging_weight().double()[up.user_slot]
    return X.numpy()


def _run_protocol(
    X: np.ndarray,
    users: np.ndarray,
    aggregation: str,
    round_idx: int,
    channel: Channel,
    tag: str,
    options: TransportOptions,
) -> np.ndarray:
    """One protocol run (fresh parties and keys) over the rows of ``X``; returns the sum."""
    ids = [f"user{u}" for u in users]
    proto = users_transport(aggregation, f"rec-{tag}-{secrets.token_hex(4)}", options)
    parties = proto.create_parties("server", ids, X.shape[1])
    channel.round = round_idx
    setup_parties(proto, parties, channel.transmit)
    res = aggregate(
        proto, parties, round_idx, {c: (X[j], 1.0) for j, c in enumerate(ids)}, channel.transmit
    )
    return np.asarray(res.mean) * res.total_weight


def secure_support(
    up: Uploads,
    aggregation: str,
    round_idx: int,
    n_items: int,
    n_users: int,
    channel: Channel | None = None,
    options: TransportOptions | None = None,
    dp: tuple[RowDPConfig, np.random.Generator] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Phase 1: the private union. The protocol sums :func:`support_indicators`; returns
    (item_idx, item_count, user_idx, user_count) over the rows with a non-zero count. With
    ``dp`` (:mod:`.row_dp`) each member adds its share of the count noise to every item row
    and the item rows are those whose noisy count reaches the threshold (noisy counts).

    Averaging weights must be >= 1 (FeSoG: #returned rows or 1, FedGNN: 1), so a count >= 1/2
    is non-zero well above the protocols' rounding."""
    if up.n and float(up.averaging_weight().min()) < 1:
        raise ValueError("secure aggregation of uploads needs averaging weights >= 1")
    channel = channel if channel is not None else Channel(Transcript(store_payloads=False))
    X = support_indicators(up, n_items, n_users)
    if dp is not None:  # each member's share of the item counts' noise
        X[:, :n_items] += shares(dp[1], dp[0].count_std, up.n, (n_items,))
    total = torch.from_numpy(
        _run_protocol(X, up.users, aggregation, round_idx, channel, "support", options or {})
    )
    icnt, ucnt = total[:n_items], total[n_items:]
    ui = torch.nonzero(ucnt >= 0.5).flatten()
    if dp is not None:
        ii = support_of(icnt, dp[0])
        return ii, icnt[ii].float(), ui, ucnt[ui].float()
    ii = torch.nonzero(icnt >= 0.5).flatten()
    return ii, icnt[ii].round().float(), ui, ucnt[ui].float()


def _secure_sums(
    up: Uploads,
    aggregation: str,
    round_idx: int,
    n_items: int | None,
    n_users: int | None,
    channel: Channel,
    options: TransportOptions,
    dp: tuple[RowDPConfig, np.random.Generator] | None = None,
) -> tuple[AggregateSums, int, int, float]:
    """Both phases on ``channel``; returns the sums, phase 1's bytes, both phases' and the
    max abs error of phase 2's sums. With ``dp`` (:mod:`.row_dp`): noisy counts in phase 1,
    the members' uploads restricted to its support, their shares of the sums' noise, no
    item count columns in phase 2 (the averages divide by phase 1's noisy counts)."""
    if n_items is None:
        n_items = int(up.item_idx.max()) + 1 if up.item_idx.numel() else 0
    if n_users is None:
        n_users = int(up.user_idx.max()) + 1 if up.user_idx.numel() else 0
    start = channel.transcript.total_bytes()
    ii, icnt, ui, _ = secure_support(
        up, aggregation, round_idx, n_items, n_users, channel, options, dp
    )
    support_bytes = channel.transcript.total_bytes() - start
    empty = torch.zeros(0)
    support = AggregateSums(ii, empty, empty, ui, empty, empty, {}, 0.0)
    if dp is not None:
        up = keep_items(up, torch.isin(up.item_idx, ii))
    X = _dense_vectors(up, support)
    if dp is not None:
        cols = _dense_columns(up, support)
        X[:, cols["item_counts"]] = 0.0
        for part in ("items", "users", "model"):
            width = cols[part].stop - cols[part].start
            X[:, cols[part]] += shares(dp[1], dp[0].sum_std(part), up.n, (width,))
    total = _run_protocol(X, up.users, aggregation, round_idx, channel, "sums", options)
    sums = _parse_dense(total, up, support)
    if dp is not None:
        sums.item_count = icnt
    nbytes = channel.transcript.total_bytes() - start
    # the simulator holds both: the protocol's sum against the float64 sum of the inputs
    return sums, support_bytes, nbytes, max_abs_error(total, X.sum(axis=0, dtype=np.float64))


def secure_sums(
    up: Uploads,
    aggregation: str,
    round_idx: int,
    n_items: int | None = None,
    n_users: int | None = None,
    channel: Channel | None = None,
    options: TransportOptions | None = None,
) -> tuple[AggregateSums, int]:
    """Run the real protocol twice (support, then sums on it); returns the sums and the bytes
    on the wire of both phases. Phase 2 keeps its own count columns, so counts match the
    sums' contributors even if a user drops between the phases.

    ``n_items`` / ``n_users``: the server's table sizes (public). ``None`` falls back to the
    cohort's largest row id + 1, a simulator convenience for callers without the tables."""
    channel = channel if channel is not None else Channel(Transcript(store_payloads=False))
    sums, _, nbytes, _ = _secure_sums(
        up, aggregation, round_idx, n_items, n_users, channel, options or {}
    )
    return sums, nbytes


def aggregate_uploads(
    up: Uploads,
    aggregation: str,
    round_idx: int,
    n_items: int | None = None,
    n_users: int | None = None,
    options: TransportOptions | None = None,
    errors: list[float] | None = None,
    dp: tuple[RowDPConfig, np.random.Generator] | None = None,
) -> tuple[AggregateSums, ServerView]:
    """``n_items`` / ``n_users``: the server's table sizes, over which the secure aggregations'
    support phase runs (see :func:`secure_sums`); ``options``: the transport's. ``errors``:
    a secure round appends the max abs error of its sums against the float64 sums of the
    users' inputs (the simulator's measurement of the quantisation; no party's view).
    ``dp``: the noisy counts and sums of :mod:`.row_dp` and the noise's generator (a secure
    aggregation only: in the clear the server sees every upload)."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {AGGREGATIONS}")
    if dp is not None and aggregation == "plain":
        raise ValueError("row DP noises a secure aggregation's sums: name a secure one")
    if dp is not None and n_items is None:  # the cohort's largest row id would be a leak
        raise ValueError("row DP counts every row of the server's item table: give n_items")
    if dp is not None and aggregation == "ideal":
        sums = noisy_ideal_sums(up, n_items, dp)
        return sums, ServerView(round_idx, aggregation, up.users, None, sums,
                                int(up.nbytes_per_user().sum()))  # fmt: skip
    if aggregation in ("plain", "ideal"):
        sums = plain_sums(up)
        per_user = up if aggregation == "plain" else None
        return sums, ServerView(
            round_idx, aggregation, up.users, per_user, sums, int(up.nbytes_per_user().sum())
        )
    sums, support_bytes, nbytes, error = _secure_sums(
        up,
        aggregation,
        round_idx,
        n_items,
        n_users,
        Channel(Transcript(store_payloads=False)),
        options or {},
        dp,
    )
    view = ServerView(round_idx, aggregation, up.users, None, sums, nbytes)
    view.extra["support_bytes"] = float(support_bytes)
    if errors is not None:
        errors.append(error)
    return sums, view


def server_update(
    state: dict[str, torch.Tensor],
    sums: AggregateSums,
    lr: float,
    weight_decay: float,
    user_key: str | None = "user_emb",
) -> None:
    """SGD step of ``FeSoG/server.py::train`` on touched rows and all model parameters."""
    with torch.no_grad():
        if sums.item_idx.numel():
            E = state["item_emb"]
            g = sums.item_sum / sums.item_count.clamp_min(1).unsqueeze(1)
            E[sums.item_idx] -= lr * g + weight_decay * E[sums.item_idx]
        if user_key is not None and sums.user_idx.numel():
            U = state[user_key]
            g = sums.user_sum / sums.user_count.clamp_min(1e-12).unsqueeze(1)
            U[sums.user_idx] -= lr * g + weight_decay * U[sums.user_idx]
        for k, s in sums.model_sum.items():
            state[k] -= lr * s / max(sums.weight_sum, 1e-12) + weight_decay * state[k]


def sums_to_payload(sums: AggregateSums, **meta: float) -> Payload:
    """The aggregate as a message (to the server)."""
    fields = {
        name: getattr(sums, name).numpy()
        for name in ("item_idx", "item_sum", "item_count", "user_idx", "user_sum", "user_count")
    }
    fields |= {f"model/{k}": v.numpy() for k, v in sums.model_sum.items()}
    return Payload(fields, {"weight_sum": sums.weight_sum, **meta})


def sums_from_payload(p: Payload) -> AggregateSums:
    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(np.array(p.array(name)))

    model = {k.removeprefix("model/"): t(k) for k in p.fields if k.startswith("model/")}
    return AggregateSums(
        t("item_idx"),
        t("item_sum"),
        t("item_count"),
        t("user_idx"),
        t("user_sum"),
        t("user_count"),
        model,
        float(p.meta["weight_sum"]),
    )
