"""Per-user gradients, LDP, pseudo items, graph expansion and the interaction-inference attack."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attacks.interaction_inference import (
    auc_from_scores,
    frequency_attack,
    interaction_inference,
    token_dictionary_attack,
)
from protocols.dp.ldp import LaplaceLDP
from securefgl.algorithms.recommendation import aggregation, fedgnn, fesog
from securefgl.algorithms.recommendation.aggregation import (
    aggregate_uploads,
    plain_sums,
    secure_support,
    support_indicators,
)
from securefgl.algorithms.recommendation.expansion import (
    ExpansionResult,
    ThirdParty,
    expand,
    item_tokens,
    new_token_key,
    token_groups,
    upload_frame,
)
from securefgl.algorithms.recommendation.ldp import LDPConfig, UserLedger, apply_ldp
from securefgl.algorithms.recommendation.pseudo import (
    factor_rows,
    gaussian_pseudo_gradients,
    sample_non_interacted,
)
from securefgl.algorithms.recommendation.uploads import Uploads
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import synthetic_ratings
from securefgl.federation.channel import Channel
from securefgl.federation.transcript import Transcript


@pytest.fixture(scope="module")
def views() -> ClientViews:
    return ClientViews.from_data(synthetic_ratings(n_users=120, n_items=200, per_user=12))


def _rows(up: Uploads, j: int) -> dict[int, torch.Tensor]:
    m = up.item_slot == j
    return dict(zip(up.item_idx[m].tolist(), up.item_grad[m], strict=True))


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_batched_gradients_equal_single_user_runs(views: ClientViews, method: str) -> None:
    """Each user's gradient in the batched program is the one it computes alone."""
    gen = torch.Generator().manual_seed(0)
    users = np.array([2, 9, 40, 77])
    rng = np.random.default_rng(0)
    if method == "fesog":
        state = fesog.init_fesog(views.n_users, views.n_items, 8, gen)

        def run(us: np.ndarray) -> Uploads:
            return fesog.local_gradients(state, views, us, fesog.FeSoGConfig(8, 0), rng)
    else:
        state = fedgnn.init_fedgnn(views.n_users, views.n_items, 8, gen)

        def run(us: np.ndarray) -> Uploads:
            return fedgnn.local_gradients(state, views, us, fedgnn.FedGNNConfig(8, 0), None, rng)[0]

    batch = run(users)
    for j, u in enumerate(users):
        alone = run(np.array([u]))
        rb, ra = _rows(batch, j), _rows(alone, 0)
        assert rb.keys() == ra.keys() == set(views.view(int(u)).train_items.tolist())
        for i in ra:
            torch.testing.assert_close(rb[i], ra[i], rtol=1e-4, atol=1e-6)
        for k in batch.model:
            torch.testing.assert_close(batch.model[k][j], alone.model[k][0], rtol=1e-4, atol=1e-6)


def test_laplace_noise_scale_per_coordinate() -> None:
    b, n_rows, d = 2, 4000, 8
    slot = torch.arange(b).repeat_interleave(n_rows)
    grad = torch.zeros(b * n_rows, d)
    grad[:n_rows] = 5.0  # user 0: far above the clip bound
    up = Uploads(
        np.arange(b),
        torch.ones(b),
        {"w": torch.zeros(b, 3)},
        slot,
        torch.arange(b * n_rows),
        grad,
        torch.zeros(b * n_rows, dtype=torch.bool),
    )
    cfg = LDPConfig("laplace", clip=0.1, lam=0.2)
    noisy, eps = apply_ldp(up, cfg, torch.Generator().manual_seed(1))
    g = noisy.item_grad
    # clipped to δ first, then Laplace(0, λ) per coordinate: E|noise| = λ, var = 2λ²
    assert g[:n_rows].mean().item() == pytest.approx(0.1, abs=0.01)
    assert (g[n_rows:]).abs().mean().item() == pytest.approx(0.2, rel=0.03)
    assert (g[n_rows:]).var().item() == pytest.approx(2 * 0.2**2, rel=0.05)
    # independent draws per coordinate (not one scalar per tensor as in the reference code)
    assert torch.unique(g[n_rows:, 0]).numel() == n_rows
    # ε per release = coordinates × 2δ/λ, composed per user by the accountant
    mech = LaplaceLDP(clip=0.1, epsilon=2 * 0.1 / 0.2, per="coordinate")
    dims = n_rows * d + 3
    assert eps == pytest.approx([mech.epsilon_per_release(dims)] * b)
    assert cfg.paper_epsilon == pytest.approx(1.0)
    ledger = UserLedger(3)
    for _ in range(3):
        ledger.record(np.array([0, 1]), eps)
    assert ledger.accountant(0).epsilon() == pytest.approx(3 * dims * 1.0)
    assert ledger.accountant(2).epsilon() == 0.0


def test_heuristic_noise_scale_follows_mean_of_each_users_tensor() -> None:
    b, n = 2, 20000
    slot = torch.arange(b).repeat_interleave(n)
    grad = torch.cat([torch.full((n, 1), 0.05), torch.full((n, 1), -2.0)])
    up = Uploads(
        np.arange(b),
        torch.ones(b),
        {},
        slot,
        torch.arange(b * n),
        grad,
        torch.zeros(b * n, dtype=torch.bool),
    )
    noisy, eps = apply_ldp(
        up, LDPConfig("heuristic", clip=0.3, lam=0.5), torch.Generator().manual_seed(2)
    )
    assert eps is None  # no DP guarantee
    dev0 = (noisy.item_grad[:n] - 0.05).abs().mean().item()
    dev1 = (noisy.item_grad[n:] + 0.3).abs().mean().item()  # clipped to −δ, then noised
    assert dev0 == pytest.approx(0.5 * 0.05, rel=0.05)
    assert dev1 == pytest.approx(0.5 * 2.0, rel=0.05)


@pytest.mark.parametrize("q", [8, 15])  # 15 of 15 unrated items: only an exact draw settles it
def test_pseudo_sampling_avoids_rated_items(q: int) -> None:
    rng = np.random.default_rng(0)
    slot = np.repeat(np.arange(3), 5)
    item = np.concatenate([np.arange(5), np.arange(5, 10), np.arange(0, 10, 2)])
    ps, pi = sample_non_interacted(slot, item, 3, 20, q, rng, max_tries=2)
    for j in range(3):
        got = pi[ps == j]
        assert got.size == q and np.unique(got).size == q
        assert not set(got.tolist()) & set(item[slot == j].tolist())


def test_gaussian_pseudo_gradients_match_moments() -> None:
    gen = torch.Generator().manual_seed(0)
    cov = torch.tensor([[1.0, 0.6], [0.6, 0.5]])
    shift = torch.tensor([1.0, -1.0])
    real = torch.randn(500, 2, generator=gen) @ torch.linalg.cholesky(cov).T + shift
    slot = torch.zeros(500, dtype=torch.long)
    fake = gaussian_pseudo_gradients(real, slot, torch.zeros(20000, dtype=torch.long), 1, gen)
    torch.testing.assert_close(fake.mean(0), real.mean(0), atol=0.03, rtol=0)
    torch.testing.assert_close(torch.cov(fake.T), torch.cov(real.T), atol=0.05, rtol=0)


def test_gaussian_pseudo_gradients_name_a_diverged_run() -> None:
    real = torch.tensor([[1.0, float("inf")], [0.5, 0.2]])
    slot = torch.zeros(2, dtype=torch.long)
    with pytest.raises(FloatingPointError, match="diverged"):
        gaussian_pseudo_gradients(real, slot, torch.zeros(3, dtype=torch.long), 1)


@pytest.mark.parametrize("method", ["fesog", "fedgnn"])
def test_pseudo_items_hide_true_items_from_nonzero_row_attack(
    views: ClientViews, method: str
) -> None:
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig

    def attack(q: int):
        tr = FedRecTrainer(
            views, RecConfig(method=method, pseudo_items=q, users_per_round=60, keep_views=1)
        )
        return interaction_inference(tr.round(0), views, score="rows", k=8)

    bare, hidden = attack(0), attack(24)
    assert bare.auc == pytest.approx(1.0) and bare.precision_at_k == pytest.approx(1.0)
    assert bare.baseline_auc == pytest.approx(0.5, abs=0.1) and bare.leaks  # no popular items
    # with q pseudo rows the uploaded rows are all alike to this attack: chance among them
    assert hidden.auc_uploaded == pytest.approx(0.5)
    # precision@8 ≈ share of real rows among uploaded (8 train items of 8 + 24 rows)
    assert hidden.precision_at_k < 0.5


def test_fedgnn_gaussian_pseudo_rows_resist_magnitude_attack(views: ClientViews) -> None:
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig

    tr = FedRecTrainer(views, RecConfig(method="fedgnn", pseudo_items=12, users_per_round=100))
    res = interaction_inference(tr.round(0), views, score="magnitude")
    assert 0.35 < res.auc_uploaded < 0.65


def test_secure_view_has_no_per_user_uploads(views: ClientViews) -> None:
    from securefgl.algorithms.recommendation.settings import aggregating
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig

    tr = FedRecTrainer(views, RecConfig(method="fesog", **aggregating("ideal"), users_per_round=60))
    view = tr.round(0)
    assert view.per_user is None and view.sums is not None
    res = interaction_inference(view, views)
    assert res.view == "aggregate only" and np.isnan(res.auc_uploaded)


def test_auc_helper() -> None:
    assert auc_from_scores(np.array([0.1, 0.9, 0.5]), np.array([False, True, False])) == 1.0
    assert auc_from_scores(np.ones(4), np.array([True, False, True, False])) == 0.5


def _hand_made():
    # user: items   0: {1, 2}   1: {2, 3}   2: {3}   3: {4}
    users = np.arange(4)
    slot = np.array([0, 0, 1, 1, 2, 3])
    items = np.array([1, 2, 2, 3, 3, 4])
    emb = np.arange(4 * 2, dtype=np.float32).reshape(4, 2) + 100.0
    return users, slot, items, emb


def test_graph_expansion_hand_made_example() -> None:
    users, slot, items, emb = _hand_made()
    channel, key = Channel(), new_token_key()
    res = expand(
        users,
        slot,
        items,
        np.arange(6),
        6,
        emb,
        key,
        ThirdParty(5),
        channel,
        np.random.default_rng(0),
    )
    got = {
        p: sorted(map(tuple, res.embedding[res.ptr[p] : res.ptr[p + 1]].tolist())) for p in range(6)
    }
    e = {u: tuple(emb[u].tolist()) for u in users}
    assert got == {0: [], 1: [e[1]], 2: [e[0]], 3: [e[2]], 4: [e[1]], 5: []}
    # the third party's view: opaque tokens, random pseudonyms, embeddings; no item ids
    (upload,) = list(channel.transcript.view("third_party").messages())
    p = upload.payload
    assert set(p.fields) == {"entry_handle", "tokens", "handles", "embeddings"}
    assert p.array("tokens").dtype == np.uint8 and p.array("tokens").shape == (6, 16)
    assert not set(p.array("entry_handle").tolist()) & set(users.tolist())
    for name in ("entry_handle", "handles"):
        assert not np.isin(p.array(name), items).any()
    # tokens do not reveal ids without the key ...
    assert (token_dictionary_attack(p, new_token_key(), 10) == -1).all()
    # ... but a third party colluding with any key holder recovers every item
    assert sorted(token_dictionary_attack(p, key, 10).tolist()) == sorted(items.tolist())
    assert not np.array_equal(item_tokens(key, items), item_tokens(new_token_key(), items))


def test_the_upload_order_names_no_user_and_ranks_no_item() -> None:
    """Entries in the users' order (user by user, item by item) would tell the third party
    which pseudonym is which user and the tokens' item order; the frame is shuffled."""
    users = np.arange(20)
    slot = np.repeat(np.arange(20), 10)
    items = np.tile(np.arange(10), 20) + slot  # ascending within each user
    key = new_token_key()
    frame, order = upload_frame(users, slot, item_tokens(key, items), np.zeros((20, 4)),
                                np.random.default_rng(0))
    handles = frame.array("entry_handle")
    assert int((handles[1:] != handles[:-1]).sum()) > 100  # blocks would change 19 times
    assert np.array_equal(frame.array("tokens"), item_tokens(key, items[order]))
    assert np.array_equal(handles, frame.array("entry_handle")[np.argsort(order)][order])
    recovered = token_dictionary_attack(frame, key, 40)
    assert np.array_equal(recovered, items[order]) and not np.array_equal(recovered, items)


def test_frequency_attack_with_server_popularity() -> None:
    users, slot, items, emb = _hand_made()
    channel, key = Channel(), new_token_key()
    expand(
        users,
        slot,
        items,
        np.arange(6),
        6,
        emb,
        key,
        ThirdParty(5),
        channel,
        np.random.default_rng(0),
    )
    (upload,) = list(channel.transcript.view("third_party").messages())
    popularity = np.bincount(items, minlength=10)
    guess = frequency_attack(upload.payload, popularity)
    # tokens of the two items rated twice map to the two most popular items
    tokens = upload.payload.array("tokens")
    twice = (tokens[:, None, :] == item_tokens(key, np.array([2, 3]))[None]).all(-1).any(1)
    assert twice.sum() == 4 and set(guess[twice].tolist()) <= {2, 3}


def test_a_real_runs_third_party_view_can_be_attacked(views: ClientViews) -> None:
    from securefgl.algorithms.recommendation.parties import THIRD_PARTY
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig

    tr = FedRecTrainer(views, RecConfig(method="fedgnn", users_per_round=20, rounds=1,
                                        store_payloads=True))  # fmt: skip
    tr.round(0)  # FedGNN expands its users' graphs first
    uploads = [m.payload for m in tr.channel.transcript.view(THIRD_PARTY).messages()]
    assert uploads
    found = np.concatenate([token_dictionary_attack(p, tr.token_key, views.n_items)
                            for p in uploads])  # fmt: skip
    assert (found >= 0).all()  # a third party holding the users' key reads every item


@pytest.mark.parametrize("backend", ["ckks", "secagg+"])
def test_secure_backends_match_plain_sums(views: ClientViews, backend: str) -> None:
    gen = torch.Generator().manual_seed(0)
    state = fesog.init_fesog(views.n_users, views.n_items, 8, gen)
    up = fesog.local_gradients(
        state, views, np.array([1, 5, 8, 11]), fesog.FeSoGConfig(8, 2), np.random.default_rng(0)
    )
    plain, _ = aggregate_uploads(up, "plain", 0)
    enc, view = aggregate_uploads(up, backend, 0)
    assert view.per_user is None and view.bytes_up > 0
    torch.testing.assert_close(enc.item_sum, plain.item_sum, atol=1e-4, rtol=0)
    torch.testing.assert_close(enc.item_count, plain.item_count)
    torch.testing.assert_close(enc.user_sum, plain.user_sum, atol=1e-4, rtol=0)
    for k in plain.model_sum:
        torch.testing.assert_close(enc.model_sum[k], plain.model_sum[k], atol=1e-4, rtol=0)
    assert enc.weight_sum == pytest.approx(plain.weight_sum, abs=1e-4)


def _fesog_round(views: ClientViews) -> Uploads:
    """Four FeSoG users with item, pseudo-item and social (user) rows."""
    state = fesog.init_fesog(views.n_users, views.n_items, 8, torch.Generator().manual_seed(0))
    up = fesog.local_gradients(
        state, views, np.array([1, 5, 8, 11]), fesog.FeSoGConfig(8, 2), np.random.default_rng(0)
    )
    assert up.user_idx.numel() and up.item_pseudo.any()
    return up


@pytest.mark.parametrize("backend", ["secagg", "ckks"])
def test_private_support_gives_plain_sums(
    views: ClientViews, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Support from the protocol (phase 1), then sums over it (phase 2) = the plain sums,
    without the simulator ever computing the union in the clear."""
    up = _fesog_round(views)
    plain = plain_sums(up)

    def no_clear_union(_: Uploads) -> None:
        raise AssertionError("the secure path computed the union in the clear")

    monkeypatch.setattr(aggregation, "plain_sums", no_clear_union)
    enc, view = aggregate_uploads(up, backend, 0, views.n_items, views.n_users)
    tol = {"rtol": 1e-3, "atol": 1e-3} if backend == "ckks" else {"rtol": 1e-6, "atol": 1e-5}
    assert torch.equal(enc.item_idx, plain.item_idx) and torch.equal(enc.user_idx, plain.user_idx)
    torch.testing.assert_close(enc.item_count, plain.item_count)
    torch.testing.assert_close(enc.user_count, plain.user_count, **tol)
    torch.testing.assert_close(enc.item_sum, plain.item_sum, **tol)
    torch.testing.assert_close(enc.user_sum, plain.user_sum, **tol)
    for k in plain.model_sum:
        torch.testing.assert_close(enc.model_sum[k], plain.model_sum[k], **tol)
    assert enc.weight_sum == pytest.approx(plain.weight_sum, rel=1e-4)
    assert 0 < view.extra["support_bytes"] < view.bytes_up
    # phase 1 alone: the per-row counts of plain_sums over exactly its rows
    ii, ic, ui, uc = secure_support(up, backend, 1, views.n_items, views.n_users)
    assert torch.equal(ii, plain.item_idx) and torch.equal(ui, plain.user_idx)
    torch.testing.assert_close(ic, plain.item_count)
    torch.testing.assert_close(uc, plain.user_count, **tol)


def _indicator_leaks(transcript: Transcript, X: np.ndarray) -> bool:
    """Does any array the server received show a user's indicator vector (its zero pattern,
    or a coordinate of its SecAgg fixed-point encoding)?"""
    from protocols.secagg import SecAggregation

    codec = SecAggregation("view").config_for(X.shape[0]).codec
    encoded = [codec.encode(np.append(x, 1.0)) for x in X]
    for env in transcript.view("server").messages():
        for v in env.payload.fields.values():
            if not isinstance(v, np.ndarray) or v.size < X.shape[1]:
                continue
            for x, e in zip(X, encoded, strict=True):
                if np.array_equal(v[: x.size] != 0, x != 0):
                    return True
                if v.dtype == np.uint64 and v.shape == e.shape and np.any(v == e):
                    return True
    return False


@pytest.mark.parametrize("backend", ["secagg", "ckks"])
def test_support_phase_server_sees_no_indicator(
    views: ClientViews, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = _fesog_round(views)
    X = support_indicators(up, views.n_items, views.n_users)
    assert X.shape == (4, views.n_items + views.n_users) and (X.sum(1) > 0).all()
    channel = Channel(Transcript())
    ii, *_ = secure_support(up, backend, 0, views.n_items, views.n_users, channel)
    assert torch.equal(ii, torch.unique(up.item_idx))
    received = list(channel.transcript.view("server").messages())
    assert received and not _indicator_leaks(channel.transcript, X)
    if backend == "ckks":
        import tenseal as ts

        from protocols.ckks import TAG_PUBLIC_CONTEXT, TAG_UPDATE
        from protocols.ckks_relay import TAG_RELAYED

        # ciphertexts, and the mean one client relays sealed under the clients' key
        assert {e.tag for e in received} == {TAG_PUBLIC_CONTEXT, TAG_UPDATE, TAG_RELAYED}
        (pub,) = [e for e in received if e.tag == TAG_PUBLIC_CONTEXT]
        ctx = ts.context_from(pub.payload.blob("context"))
        assert not ctx.is_private()
        updates = [e for e in received if e.tag == TAG_UPDATE]
        assert len(updates) == up.n
        from protocols.ckks_codec import CKKSParams, make_codec

        codec = make_codec(ctx, CKKSParams())  # the server's: the public context only
        for env in updates:  # every field is a well-formed ciphertext the server cannot open
            for blob in env.payload.fields.values():
                ct = codec.load(blob, codec.per_ciphertext, "update")
                with pytest.raises(ValueError, match="secret"):
                    codec.decrypt(ct, codec.per_ciphertext)
    # control: the same check flags the indicators under a protocol that sends them as is
    from protocols.plain import PlainAggregation

    monkeypatch.setattr(
        aggregation, "users_transport", lambda name, eid, options: PlainAggregation()
    )
    control = Channel(Transcript())
    secure_support(up, backend, 0, views.n_items, views.n_users, control)
    assert _indicator_leaks(control.transcript, X)


def test_laplace_whole_vector_budget() -> None:
    b, n_rows, d = 2, 500, 4
    slot = torch.arange(b).repeat_interleave(n_rows)
    up = Uploads(
        np.arange(b),
        torch.ones(b),
        {},
        slot,
        torch.arange(b * n_rows),
        torch.zeros(b * n_rows, d),
        torch.zeros(b * n_rows, dtype=torch.bool),
    )
    cfg = LDPConfig("laplace", clip=0.1, lam=0.2, per="vector")  # ε = 1 for the whole upload
    noisy, eps = apply_ldp(up, cfg, torch.Generator().manual_seed(3))
    dims = n_rows * d
    assert eps == pytest.approx([1.0, 1.0])
    expected = LaplaceLDP(clip=0.1, epsilon=1.0, per="vector").scale(dims)  # 2δD/ε
    assert noisy.item_grad.abs().mean().item() == pytest.approx(expected, rel=0.05)


def test_star_model_per_user_gradients_match_autograd_alone(views: ClientViews) -> None:
    """The paper's star graph: each user's W gradient (Σ x_jᵀ ∂L/∂(W x_j) over its star,
    from one shared product) is what autograd gives for that user alone with W as a leaf;
    neighbour users included."""
    d, users = 6, np.array([3, 11, 25])
    state = fedgnn.init_fedgnn(
        views.n_users, views.n_items, d, torch.Generator().manual_seed(1), arch="star"
    )
    assert set(state) == {"item_emb", "local_user_emb", "W_1", "a_1"}
    _, pos = views.train.positions(users)
    gen = np.random.default_rng(2)  # two fixed neighbours on every rating
    ptr = np.arange(0, 2 * views.train.col.size + 1, 2)
    nbrs = gen.normal(size=(2 * views.train.col.size, d)).astype(np.float32)
    expansion = ExpansionResult(ptr, nbrs)
    cfg = fedgnn.FedGNNConfig(d, 0, arch="star", loss="mse")
    rng = np.random.default_rng(0)
    batch, g_self = fedgnn.local_gradients(state, views, users, cfg, expansion, rng)
    for j, u in enumerate(users):
        slot, item, rating, nb_occ, nb = fedgnn._inputs(views, np.array([u]), expansion)
        W = state["W_1"].clone().requires_grad_(True)
        a = state["a_1"].clone().requires_grad_(True)
        e_u = state["local_user_emb"][[u]].clone().requires_grad_(True)
        e_i = state["item_emb"][item].clone().requires_grad_(True)
        members, group = fedgnn.star_members(e_u, slot, e_i, nb_occ, nb)
        h = fedgnn.star_attend(members @ W, a.expand(group.numel(), -1), group, 1)
        ((h[slot] * e_i).sum(1) - rating).pow(2).mean().backward()
        torch.testing.assert_close(batch.model["W_1"][j], W.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(batch.model["a_1"][j], a.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(g_self[j], e_u.grad[0], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(batch.item_grad[batch.item_slot == j], e_i.grad)


def test_user_group_keeps_its_tokens_and_draws_fresh_pseudonyms(views: ClientViews) -> None:
    """The tokens depend only on the key and the items, so a group computes them once; each
    expansion still sends fresh pseudonyms (the third party cannot link two uploads by them)."""
    from securefgl.algorithms.recommendation.parties import UserGroup
    from securefgl.algorithms.recommendation.settings import RecConfig

    key = new_token_key()
    group = UserGroup(0, RecConfig(method="fedgnn", user_groups=1), views, key)
    first, second = group.expansion_upload(), group.expansion_upload()
    _, pos = views.train.positions(group.users)
    expected = sorted(map(bytes, item_tokens(key, views.train.col[pos])))
    assert sorted(map(bytes, first.array("tokens"))) == expected
    assert sorted(map(bytes, second.array("tokens"))) == expected
    # the group maps the (shuffled) frame's entries back to its ratings
    mapped = item_tokens(key, views.train.col[group._frame_positions])
    assert np.array_equal(second.array("tokens"), mapped)
    assert not np.intersect1d(first.array("handles"), second.array("handles")).size


@given(st.lists(st.integers(0, 40), min_size=1, max_size=300), st.binary(min_size=32, max_size=32))
def test_token_groups_number_tokens_as_np_unique_does(items: list[int], key: bytes) -> None:
    tokens = item_tokens(key, np.array(items))
    void = tokens.view(np.dtype((np.void, tokens.shape[1]))).ravel()
    np.testing.assert_array_equal(token_groups(tokens), np.unique(void, return_inverse=True)[1])


def test_fedgnn_representations_from_shared_weights_equal_the_per_user_copies(
    views: ClientViews,
) -> None:
    """Evaluation uses the shared model directly; training gathers a copy per user slot.
    Both must give the same user representations."""
    state = fedgnn.init_fedgnn(views.n_users, views.n_items, 6, torch.Generator().manual_seed(0))
    users = np.arange(12)
    slot, item, _, nb_occ, nb = fedgnn._inputs(views, users, None)
    args = (state["local_user_emb"][users], slot, state["item_emb"][item], nb_occ,
            torch.zeros(0, 6))  # fmt: skip
    per_slot = {k: state[k].unsqueeze(0).expand(12, *state[k].shape) for k in fedgnn.MODEL_KEYS}
    torch.testing.assert_close(
        fedgnn.representations(state, views, users, None),
        fedgnn.user_representation(per_slot, *args),
    )


@given(st.lists(st.integers(0, 3), max_size=40), st.booleans())
def test_factor_rows_applies_each_row_s_own_user_factor(slots: list[int], grouped: bool) -> None:
    """Either path (a view for equal, ordered groups; padding otherwise) gives L_u z_i."""
    n_slots, d = 4, 3
    equal = [u for u in range(n_slots) for _ in range(2)]  # the view path
    slot = torch.tensor(equal if grouped else sorted(slots), dtype=torch.long)
    gen = torch.Generator().manual_seed(len(slots))
    z = torch.randn(slot.numel(), d, generator=gen)
    factor = torch.randn(n_slots, d, d, generator=gen)
    expected = (factor[slot] @ z.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(factor_rows(z, factor, slot, n_slots), expected)
    shuffled = torch.randperm(slot.numel(), generator=gen)
    torch.testing.assert_close(
        factor_rows(z[shuffled], factor, slot[shuffled], n_slots), expected[shuffled]
    )
