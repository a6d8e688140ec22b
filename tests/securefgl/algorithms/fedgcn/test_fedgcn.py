"""FedGCN: secure neighbour sums (plain / masked / ckks) and FedAvg on the augmented features."""

import numpy as np
import pytest
import scipy.sparse as sp

from protocols.bundles import unbundle
from protocols.fixedpoint import FixedPointCodec
from protocols.secure_sum.parties import TAG_CONTRIBUTION, TAG_DELIVERY
from securefgl.algorithms.fedgcn.algorithm import NEIGHBOUR_SUMS, FedGCN, FedGCN1Hop
from securefgl.algorithms.fedgcn.neighbour_sums import (
    NeighbourSumClient,
    central_neighbour_sums,
    run_neighbour_sums,
)
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.algorithms.registry import algorithm_class
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import build_client_views, partition_graph, random_split
from securefgl.data.synthetic import csbm
from securefgl.data.views import opaque_id_permutation
from securefgl.experiment.runner import run_single
from securefgl.federation import SERVER, Channel, LocalExecutor, Transcript, client_party_id
from securefgl.federation.hosted_sums import SumRelay

VIEW_SEED = 3
# plain: float64 sums; masked: fixed point 2^-32 per summand; ckks: public-key noise ~2e-8
# plus rounding to 2^-24, carried through two hops (~2e-8 measured): 1e-6 holds with margin
TOL = {"plain": 1e-9, "masked": 1e-7, "ckks": 1e-6}


def make_world(n=150, k=4, seed=1, cross_edges="known"):
    data = csbm(num_nodes=n, num_features=8, avg_degree=6.0, seed=seed)
    data.train_mask, data.val_mask, data.test_mask = random_split(n, 0.1, 0.1, 0.8, seed=0)
    part = partition_graph(data, k, "random", seed=seed)
    views = build_client_views(data, part.assignment, cross_edges, seed=VIEW_SEED)
    return data, views


def precompute(views, settings, channel=None):
    ids = [client_party_id(v.client_id) for v in views]
    parties = {c: NeighbourSumClient(v, settings) for c, v in zip(ids, views, strict=True)}
    relay = SumRelay(SERVER)
    channel = channel if channel is not None else Channel(Transcript())
    ex = LocalExecutor({**parties, SERVER: relay})
    report = run_neighbour_sums(ids, ex, channel, settings, "test-fedgcn")
    return parties, relay, channel, report


def dense_reference(data, norm):
    """Independent of the module: dense Â from the global graph, [ÂX, Â²X]."""
    n = data.num_nodes
    a = np.zeros((n, n))
    src, dst = data.edge_index.numpy()
    a[src, dst] = a[dst, src] = 1.0
    np.fill_diagonal(a, 1.0)
    deg = a.sum(1)
    a_hat = a / np.sqrt(np.outer(deg, deg)) if norm == "sym" else a / deg[:, None]
    x = data.x.numpy().astype(np.float64)
    return [a_hat @ x, a_hat @ a_hat @ x]


def global_rows(view):
    """SIMULATOR SIDE: the global node of each of the view's rows."""
    inv = np.argsort(opaque_id_permutation(view.num_global_nodes, VIEW_SEED))
    return inv[view.node_ids.numpy()]


def max_error(views, parties, ref):
    err = 0.0
    for v in views:
        rows = global_rows(v)
        for hop, expected in enumerate(ref, start=1):
            got = parties[client_party_id(v.client_id)].hop_feats[hop]
            err = max(err, float(np.abs(got - expected[rows]).max()))
    return err


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("mode", ["plain", "masked", "ckks"])
@pytest.mark.parametrize("norm", ["sym", "rw"])
def test_sums_equal_central_rows(mode, norm):
    data, views = make_world()
    parties, *_ = precompute(views, FedGCNSettings(hops=2, sum_mode=mode, norm=norm))
    ref = dense_reference(data, norm)
    assert max_error(views, parties, ref) < TOL[mode]
    # and the module's own simulator reference agrees with the dense one
    sparse_ref = central_neighbour_sums(data.edge_index, data.x, 2, norm)
    for a, b in zip(sparse_ref, ref, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_shared_key_ckks_sums_equal_central_rows_with_smaller_uploads():
    """One key of the clients: the same rows, seeded uploads (about half the bytes)."""
    data, views = make_world()
    hop_bytes = {}
    for keys in ("receiver", "shared"):
        settings = FedGCNSettings(hops=2, sum_mode="ckks", sum_keys=keys)
        parties, _, _, report = precompute(views, settings)
        assert max_error(views, parties, dense_reference(data, "sym")) < TOL["ckks"]
        hop_bytes[keys] = report.bytes - report.setup_bytes
    assert hop_bytes["shared"] < 0.75 * hop_bytes["receiver"], hop_bytes


def test_comparison_can_fail_without_cross_client_terms():
    """The check is meaningful: dropping the received sums (internal edges only) breaks it."""
    data, views = make_world()
    parties, *_ = precompute(views, FedGCNSettings(hops=1))
    ref = dense_reference(data, "sym")
    for p in parties.values():
        p.hop_feats[1] = p.r[:, None] * (p.a_own @ p.hop_feats[0])
    assert max_error(views, parties, ref[:1]) > 0.05


def test_two_hop_paths_through_third_clients_are_included():
    """With K = 3, Â²X rows need neighbours' sums that include a third client's nodes."""
    data, views = make_world(n=120, k=3, seed=5)
    parties, _, _, report = precompute(views, FedGCNSettings(hops=2, sum_mode="masked"))
    assert max_error(views, parties, dense_reference(data, "sym")) < TOL["masked"]
    assert report.hops == 2 and report.bytes > 0


@pytest.mark.parametrize(("features", "blocks"), [("last", 1), ("hops", 2), ("all", 3)])
def test_augmented_view_holds_only_own_nodes(features, blocks):
    """'Isolated external neighbours removal': no external node becomes a row of a client;
    the model input is the requested stack of hop features."""
    _, views = make_world()
    parties, *_ = precompute(views, FedGCNSettings(hops=2, features=features))
    for v in views:
        p = parties[client_party_id(v.client_id)]
        aug = p.augmented_view()
        d = v.num_features
        assert aug.x.shape == (v.num_nodes, blocks * d)
        np.testing.assert_allclose(aug.x[:, -d:].numpy(), p.hop_feats[2], rtol=1e-6, atol=1e-6)
        if features == "all":
            assert np.array_equal(aug.x[:, :d].numpy(), v.x.numpy())
        assert np.array_equal(aug.node_ids.numpy(), v.node_ids.numpy())
        assert np.array_equal(aug.edge_index.numpy(), v.edge_index.numpy())


# ---------------------------------------------------------------- who sees what


def _contributions(parties, hop):
    """SIMULATOR SIDE: every sender's individual block per receiver at ``hop``."""
    return {
        (sender, receiver): block
        for sender, p in parties.items()
        for receiver, block in p.contributions(hop).items()
    }


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_receiver_view_has_no_individual_contribution(mode):
    _, views = make_world()
    parties, relay, channel, _ = precompute(views, FedGCNSettings(hops=1, sum_mode=mode))
    blocks = _contributions(parties, 1)
    codec = FixedPointCodec(32, None, max_summands=len(views))
    for receiver, p in parties.items():
        view = channel.transcript.view(receiver)
        assert {e.sender for e in view.entries} == {SERVER}  # clients never talk directly
        deliveries = [e for e in view.entries if e.tag == TAG_DELIVERY]
        assert len(deliveries) == (1 if p.neighbours else 0)  # ONE aggregate per hop
        for entry in deliveries:
            fields = entry.payload().fields
            assert not {"row", "col", "data", "values", "y"} & set(fields)
            if mode == "masked":  # one masked vector: decoding it does not give the sum
                assert set(fields) == {"y_sum"}
                own = sum(blocks[(s, receiver)] for s in p.neighbours)
                decoded = codec.decode(fields["y_sum"])
                idx = p.boundary
                expected = own[idx].toarray().ravel()
                assert not np.allclose(decoded, expected, atol=1e-3)
    # the server holds no secret key (ckks) and sees only masked vectors (masked)
    if mode == "ckks":
        assert relay.sums.server.contexts
        assert all(not ctx.is_private() for ctx in relay.sums.server.contexts.values())
    else:
        for e in channel.transcript.view(SERVER).entries:
            if e.tag == TAG_CONTRIBUTION:
                parts = unbundle(e.payload(), "test").values()
                assert parts and all(set(part.fields) == {"y"} for part in parts)


def test_plain_receiver_sees_every_contribution():
    """The contrast (and proof the view test can fail): plain delivers each block."""
    _, views = make_world()
    parties, _, channel, _ = precompute(views, FedGCNSettings(hops=1, sum_mode="plain"))
    blocks = _contributions(parties, 1)
    receiver, p = next((r, p) for r, p in parties.items() if len(p.neighbours) >= 2)
    deliveries = [e for e in channel.transcript.view(receiver).entries if e.tag == TAG_DELIVERY]
    assert len(deliveries) == len(p.neighbours)
    for entry in deliveries:
        payload = entry.payload()
        sender = payload.meta["sender"]
        got = sp.coo_matrix(
            (payload.fields["data"], (payload.fields["row"], payload.fields["col"])),
            shape=blocks[(sender, receiver)].shape,
        )
        assert abs(got - blocks[(sender, receiver)]).max() == 0


# ---------------------------------------------------------------- algorithm


def test_settings_from_config_and_registry():
    assert algorithm_class("fedgcn") is FedGCN and algorithm_class("fedgcn-1hop") is FedGCN1Hop
    cfg = ExperimentConfig(
        fedgcn={"sum_mode": "masked", "norm": "rw", "hops": 1, "features": "all"}
    )
    st = FedGCN(cfg).settings
    assert (st.sum_mode, st.norm, st.hops, st.features) == ("masked", "rw", 1, "all")
    assert FedGCN1Hop(cfg.replace(fedgcn={"hops": 2})).settings.hops == 1
    assert ExperimentConfig().fedgcn == FedGCNSettings()
    with pytest.raises(ValueError):
        FedGCNSettings(hops=3)
    with pytest.raises(ValueError):
        FedGCNSettings(sum_mode="fhe")
    with pytest.raises(ValueError):
        FedGCNSettings(features="x")
    with pytest.raises(ValueError, match="sum_keys"):
        FedGCNSettings(sum_keys="everyone")
    shared = {"sum_keys": "shared"}
    with pytest.raises(ValueError, match="applies to ckks"):
        ExperimentConfig(protocol=["secagg"], algorithms=["fedgcn"], fedgcn=shared)
    with pytest.raises(ValueError, match="malicious"):
        ExperimentConfig(protocol={"stack": ["ckks"], "threat_model": "malicious"},
                         algorithms=["fedgcn"], fedgcn=shared)  # fmt: skip


def _config(**kw):
    csbm_args = {"num_nodes": 400, "num_features": 16, "feature_signal": 0.3, "homophily": 0.85}
    base = dict(
        dataset="csbm",
        csbm=csbm_args,
        clients=5,
        partition="random",
        cross_edges="known",
        rounds=40,
        eval_every=40,
        hidden=32,
    )
    return ExperimentConfig(**{**base, **kw})


def test_needs_known_cross_edges():
    cfg = _config(cross_edges="hidden")
    with pytest.raises(ConfigError):
        run_single(cfg, "fedgcn", 0, csbm(**cfg.csbm), progress=False)


def test_fedgcn_beats_fedavg_on_homophilous_random_partition():
    cfg = _config()
    data = csbm(**cfg.csbm)
    acc = {
        algo: np.mean(
            [run_single(cfg, algo, s, data, progress=False).final["test_acc"] for s in (0, 1)]
        )
        for algo in ("fedavg", "fedgcn", "fedgcn-1hop")
    }
    assert acc["fedgcn"] > acc["fedavg"] + 0.1, acc
    assert acc["fedgcn-1hop"] > acc["fedavg"] + 0.05, acc


def test_fedgcn_masked_sums_with_secagg_training_match_plain():
    """Masked neighbour sums + secagg training give the plain run's model (up to fixed-point
    rounding) and cost more setup bytes (key exchange + masked dense supports)."""
    cfg = _config(rounds=10, eval_every=10)
    data = csbm(**cfg.csbm)
    plain = run_single(cfg, "fedgcn", 0, data, progress=False)
    secure_cfg = cfg.replace(protocol=["secagg"], fedgcn={"sum_mode": "masked"})
    assert FedGCN(secure_cfg).settings.sum_mode == "masked"
    assert FedGCN(secure_cfg).config.model == "mlp"
    secure = run_single(secure_cfg, "fedgcn", 0, data, progress=False)
    assert abs(secure.final["test_acc"] - plain.final["test_acc"]) <= 0.02
    assert secure.setup_bytes != plain.setup_bytes


def test_fedgcn_shared_key_ckks_run_matches_plain_and_says_whose_key():
    cfg = _config(rounds=5, eval_every=5)
    data = csbm(**cfg.csbm)
    plain = run_single(cfg, "fedgcn", 0, data, progress=False)
    secure = run_single(cfg.replace(protocol=["ckks"], fedgcn={"sum_keys": "shared"}), "fedgcn",
                        0, data, progress=False)  # fmt: skip
    assert abs(secure.final["test_acc"] - plain.final["test_acc"]) <= 0.02
    assert secure.protection[NEIGHBOUR_SUMS] == "ckks (one key of the clients)"
