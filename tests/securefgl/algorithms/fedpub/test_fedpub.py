"""FED-PUB: METIS and the largest component, the masked GCN, α = softmax(τS), the
personalised sums (plain = masked = ckks), what reaches the server, the embeddings' noise
and its ε, and the baselines' mixing."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from protocols.bundles import unbundle
from protocols.dp.accounting import PrivacyAccountant
from securefgl.algorithms.fedpub.model import MaskedGCN, normalized_adjacency, proxy_graph
from securefgl.algorithms.fedpub.parties import TAG_EMBEDDING, TAG_MODEL, PubServer
from securefgl.algorithms.fedpub.settings import FedPubSettings
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data.metis import largest_component, metis_assignment
from securefgl.experiment.runner import load_graph, run_single
from securefgl.federation import Transcript

CSBM = {"num_nodes": 240, "num_features": 12, "avg_degree": 6.0, "num_classes": 3}


def config(rounds=2, clients=4, **fedpub):
    return ExperimentConfig(
        dataset="csbm", csbm=CSBM, clients=clients, partition="metis", rounds=rounds,
        eval_every=1, train_fraction=0.2, val_fraction=0.4, test_fraction=0.4,
        fedpub={"hidden": 16, **fedpub},
    )  # fmt: skip


def run(cfg, algorithm="fed-pub", transcript=None):
    return run_single(cfg, algorithm, 0, load_graph(cfg), progress=False, keep_state=True,
                      transcript=transcript)  # fmt: skip


# ------------------------------------------------------------------ data: METIS, LCC


def two_cliques(n=6):
    a = [(i, j) for i in range(n) for j in range(n) if i != j]
    b = [(i + n, j + n) for i, j in a]
    ei = np.array(a + b + [(0, n), (n, 0)]).T
    return ei, 2 * n


def test_metis_cuts_the_bridge_and_is_deterministic():
    ei, n = two_cliques()
    part = metis_assignment(ei, n, 2)
    assert len(set(part[:6])) == 1 and len(set(part[6:])) == 1 and part[0] != part[6]
    assert np.array_equal(part, metis_assignment(ei, n, 2))
    assert np.array_equal(metis_assignment(ei, n, 1), np.zeros(n))
    k5 = metis_assignment(*two_cliques(10), 5)  # k-way, every part non-empty
    assert sorted(set(k5)) == [0, 1, 2, 3, 4]


def test_largest_component_keeps_node_order():
    ei = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])  # {0,1,2} and {3,4}
    data = Data(x=torch.arange(5.0)[:, None], edge_index=ei, y=torch.arange(5))
    out = largest_component(data)
    assert out.num_nodes == 3 and out.y.tolist() == [0, 1, 2] and out.edge_index.shape[1] == 4


# ------------------------------------------------------------------ model


def test_masks_ones_equal_the_plain_gcn_and_prune_in_eval():
    torch.manual_seed(0)
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    adj = normalized_adjacency(ei, 3)
    dense = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=torch.float32)
    d = dense.sum(1).rsqrt()
    assert torch.allclose(adj.to_dense(), d[:, None] * dense * d[None, :], atol=1e-6)
    net = MaskedGCN(4, 8, 3, dropout=0.0, masks=True, prune=1e-3).eval()
    plain = MaskedGCN(4, 8, 3, dropout=0.0, masks=False).eval()
    plain.load_state_dict(net.state_dict())
    x = torch.randn(3, 4)
    assert torch.allclose(net(x, adj), plain(x, adj))
    assert not any("mask" in n for n in net.shared_names())
    with torch.no_grad():
        net.mask_w3[0, 0] = 5e-4  # below the threshold: zero in eval, kept in training
    assert net.masked("w3")[0, 0] == 0
    net.train()
    assert torch.isclose(net.masked("w3")[0, 0], net.w3[0, 0] * 5e-4)
    loss = net(x, adj).sum() + net.mask_l1()
    loss.backward()
    assert net.mask_w1.grad is not None and net.mask_w1.grad.abs().sum() > 0


def test_proxy_graph_blocks_have_no_edges_between_them():
    x, ei = proxy_graph(3, 50, 0.2, 7, seed=1)
    assert x.shape == (150, 7) and np.array_equal(ei, proxy_graph(3, 50, 0.2, 7, seed=1)[1])
    assert np.array_equal(ei[0] // 50, ei[1] // 50)  # same block
    assert 0.15 < ei.shape[1] / 2 / (3 * 50 * 49 / 2) < 0.25


# ------------------------------------------------------------------ α = softmax(τ S)


def test_alpha_is_row_softmax_of_tau_cosine():
    rng = np.random.default_rng(0)
    h = rng.normal(size=(4, 6))
    server = PubServer(np.zeros(1), (np.zeros((1, 1)), np.zeros((2, 0))), list("abcd"),
                       FedPubSettings(tau=3.0), "fed-pub")  # fmt: skip
    server.embeddings = h
    w = server.weights(0)
    for i in range(4):
        cos = [h[i] @ h[j] / np.linalg.norm(h[i]) / np.linalg.norm(h[j]) for j in range(4)]
        e = np.exp(3.0 * np.array(cos))
        assert np.allclose(w[i], e / e.sum())
    assert np.allclose(np.diag(server.similarity), 1)


# ------------------------------------------------------------------ the round


def test_plain_run_mixes_with_alpha_and_masks_stay_local():
    res = run(config(rounds=1).replace(store_payloads=True), transcript=Transcript(True))
    algo = res.state.algorithm
    clients = [algo.clients[c] for c in algo.ids]
    theta = np.stack([c.theta for c in clients])
    assert np.allclose(np.stack([c.pending for c in clients]), algo.server.W @ theta)
    seen = res.transcript.view("server")
    size = sum(getattr(clients[0].model, n).numel() for n in clients[0].names)
    for env in seen.messages(TAG_MODEL):  # θ_j without its masks
        assert env.payload.fields["v"].size == size
    assert all(c.model.mask_w1.requires_grad for c in clients)


@pytest.mark.parametrize("mode", ["masked", "ckks"])
def test_secure_sums_equal_plain_and_server_never_sees_a_model(mode):
    plain = run(config(rounds=2, sums="plain"))
    res = run(config(rounds=2, sums=mode).replace(store_payloads=True),
              transcript=Transcript(True))  # fmt: skip
    p_alg, s_alg = plain.state.algorithm, res.state.algorithm
    for c in s_alg.ids:  # same α, same θ_j → same θ̄_i, up to the encoding
        assert np.abs(s_alg.clients[c].pending - p_alg.clients[c].pending).max() < 1e-5
    assert np.allclose(s_alg.server.W, p_alg.server.W, atol=1e-6)
    seen = res.transcript.view("server")
    assert TAG_MODEL not in seen.tags() and TAG_EMBEDDING in seen.tags()
    theta = np.concatenate([s_alg.clients[c].theta for c in s_alg.ids])
    for env in seen.messages():  # no float array on the server's side carries a θ_j
        for arr in env.payload.fields.values():
            a = np.asarray(arr)
            if a.dtype.kind == "f" and a.size >= 16:
                assert not np.isin(np.round(a.ravel(), 6), np.round(theta, 6)).mean() > 0.5
    if mode == "masked":
        for env in seen.messages("secure-sum/contribution"):
            for part in unbundle(env.payload, "test").values():
                assert part.fields["y"].dtype == np.uint64
    assert abs(res.final["test_acc"] - plain.final["test_acc"]) <= 0.005
    assert res.protection["personalised aggregation θ̄_i = Σ_j α_ij θ_j"].startswith(mode)


def test_gaussian_embeddings_are_clipped_noised_and_accounted():
    clip, sigma = 1.0, 0.5
    res = run(config(rounds=3, embedding="gaussian", embedding_clip=clip, sums="masked",
                     embedding_noise=sigma, clients=6, hidden=128))  # fmt: skip
    algo = res.state.algorithm
    resid = []
    for i, c in enumerate(algo.ids):  # the last round's embedding came from this model
        party = algo.clients[c]
        party.model.eval()
        with torch.no_grad():
            h = party.model.embed(*party.proxy).mean(0).double().numpy()
        h = h * min(1.0, clip / np.linalg.norm(h))
        resid.append(algo.server.embeddings[i] - h)
    resid = np.concatenate(resid)
    # the noise is secret (not seeded): allow 5 standard errors of a sample std of n draws
    expected = sigma * 2 * clip
    assert abs(resid.std() - expected) < 5 * expected / np.sqrt(2 * resid.size)
    acc = PrivacyAccountant("rdp", 1e-5)
    for _ in range(3):
        acc.step(sigma, 1.0)
    assert res.privacy["embedding_epsilon"] == pytest.approx(acc.epsilon())
    assert 0 < res.privacy["embedding_epsilon"] < float("inf")
    assert "server" in res.privacy["adversary"]
    [claim] = res.privacy["guarantees"]  # in the report's ε column, with its unit
    assert claim["epsilon"] == res.privacy["embedding_epsilon"] and "h̃_i" in claim["unit"]
    more = run(config(rounds=3, embedding="gaussian", embedding_noise=2.0, clients=6,
                      sums="masked"))  # fmt: skip
    assert more.privacy["embedding_epsilon"] < res.privacy["embedding_epsilon"]
    assert not run(config(rounds=1)).privacy.get("guarantees")  # plain: nothing claimed


# ------------------------------------------------------------------ baselines


def test_baselines_mix_as_their_papers():
    avg = run(config(rounds=1), "fedpub-fedavg").state.algorithm
    pend = np.stack([avg.clients[c].pending for c in avg.ids])
    assert np.allclose(pend, pend.mean(0)) and np.allclose(avg.server.W, 1 / 4)
    per = run(config(rounds=1), "fedper").state.algorithm
    c0 = per.clients[per.ids[0]]
    assert "w3" not in c0.names and c0.pending.size == sum(
        getattr(c0.model, n).numel() for n in ("w1", "b1", "w2", "b2"))
    local = run(config(rounds=2), "fedpub-local").state.algorithm
    assert all(local.clients[c].pending is None for c in local.ids)
    transcript = Transcript()
    gcfl = run(config(rounds=1), "gcfl", transcript).state.algorithm
    assert np.allclose(gcfl.server.W.sum(1), 1)
    sizes = list(transcript.view("server").messages("fedpub/training-size"))
    assert len(sizes) == 4  # the counts GCFL weighs by reach its server through the channel
    assert gcfl.server.train_weights.tolist() == [gcfl.clients[c].weight for c in gcfl.ids]
    with pytest.raises(ConfigError, match="secure personalised sums"):
        run(config(rounds=1, sums="masked"), "fedpub-fedavg")


@pytest.mark.parametrize(("algorithm", "protocol", "fedpub", "match"), [
    # the server holds every θ_j and the proxy graph: it recomputes the noised h̃_j
    ("fed-pub", "plain", {"embedding": "gaussian"}, "recomputes h̃_j"),
    # the stack would not be applied: the models travel by FED-PUB's plain sums
    ("fed-pub", "secagg", {"sums": "plain"}, "would not be applied"),
    ("fedpub-fedavg", "secagg", {"sums": "plain"}, "would not be applied"),
    # a sum to one client over fewer than min_senders others: each keeps its own model
    ("fed-pub", "secagg", {"min_senders": 4}, "min_senders = 4"),
])  # fmt: skip
def test_settings_that_would_not_hold_are_refused(algorithm, protocol, fedpub, match):
    cfg = config(rounds=1, **fedpub).replace(protocol=[protocol])
    with pytest.raises(ConfigError, match=match):
        run(cfg, algorithm)
