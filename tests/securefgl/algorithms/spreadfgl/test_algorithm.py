"""SpreadFGL / FedGL on the runtime: edge servers are parties, every message is on the
transcript, Eq. 16 mixes per-server aggregates, H is protected and accounted, and no
party holds another client's features."""

import numpy as np
import pytest

from securefgl.algorithms.common.edge.client import EdgeClient
from securefgl.algorithms.common.edge.server import SERVER_MODEL_TAG
from securefgl.algorithms.registry import algorithm_class
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG
from securefgl.config import ConfigError
from tests.securefgl.algorithms.spreadfgl.world import (
    build,
    reachable_arrays,
    tiny_config,
    tiny_graph,
)


@pytest.fixture(scope="module")
def graph():
    return tiny_graph()


@pytest.fixture(scope="module")
def spread(graph):
    algo, views, transcript = build("spreadfgl", tiny_config(rounds=2), graph)
    losses = [algo.train_round(r) for r in range(2)]
    return algo, views, transcript, losses


def test_edge_servers_are_parties_with_their_own_views(spread):
    algo, views, transcript, losses = spread
    assert all(np.isfinite(losses))
    servers = ["edge-0", "edge-1", "edge-2"]
    assert sorted(algo.server_ids) == servers
    for sid, members in algo.members.items():
        view = transcript.view(sid)
        h_senders = {e.sender for e in view.entries if e.tag == H_TAG}
        assert h_senders == set(members)  # a server hears only its own clients' H
        model_senders = {e.sender for e in view.entries if e.tag == SERVER_MODEL_TAG}
        assert model_senders == set(servers) - {sid}  # 3-ring = K3
    for cid in algo.clients:
        senders = {e.sender for e in transcript.view(cid).entries}
        assert senders == {algo.clients[cid].server_id}  # a client talks only to its server


def test_neighbours_exchange_per_server_aggregates_and_eq16_is_the_uniform_mean(spread):
    algo, _, transcript, _ = spread
    last = max(e.round for e in transcript.entries)
    shared = {e.sender: e.payload() for e in transcript.entries
              if e.tag == SERVER_MODEL_TAG and e.round == last}  # fmt: skip
    sizes = {sid: len(m) for sid, m in algo.members.items()}
    for sid, payload in shared.items():
        assert payload.meta["clients"] == sizes[sid]
        assert payload.array("params").shape == (algo.dim_params,)  # one model, not M_j
    mix = sum(sizes[s] * shared[s].array("params").astype(np.float64) for s in shared)
    mix /= sum(sizes.values())
    for server in algo.servers.values():  # K3 + a_jj = 1: every server holds the mean
        np.testing.assert_allclose(server.params, mix, rtol=1e-5, atol=1e-6)


def test_every_client_gets_generated_rows_only_for_its_own_nodes(spread):
    algo, views, transcript, _ = spread
    for cid, client in algo.clients.items():
        patches = [e.payload() for e in transcript.view(cid).entries if e.tag == PATCH_TAG]
        assert patches and all(p.array("links").shape == (client.num_own, 3) for p in patches)
        assert client.feats.num_rows > client.num_own  # the patcher added virtual nodes


def test_no_party_holds_another_clients_features(spread, graph):
    algo, views, _, _ = spread
    rows = {tuple(r) for r in graph.x.numpy().round(5).tolist()}
    for cid, client in algo.clients.items():
        own = {tuple(r) for r in client.x_own.toarray().round(5).tolist()}
        for arr in reachable_arrays(client):
            if arr.ndim == 2 and arr.shape[1] == graph.num_features and len(arr):
                found = {tuple(r) for r in arr.round(5).tolist()} & (rows - own)
                assert not {r for r in found if any(r)}, cid  # zero rows are public
    for sid, server in algo.servers.items():
        for arr in reachable_arrays(server):
            if arr.ndim == 2 and arr.shape[1] == graph.num_features:
                found = {tuple(r) for r in arr.round(5).tolist()} & rows
                assert not {r for r in found if any(r)}, sid


def test_ring_of_four_mixes_only_neighbours(graph):
    cfg = tiny_config(clients=8, edge_servers=4, server_topology="ring")
    algo, _, transcript = build("spreadfgl", cfg, graph)
    algo.train_round(0)
    to_edge0 = {e.sender for e in transcript.view("edge-0").entries if e.tag == SERVER_MODEL_TAG}
    assert to_edge0 == {"edge-1", "edge-3"}
    assert not np.allclose(algo.servers["edge-0"].params, algo.servers["edge-2"].params)


def test_fedgl_has_one_server_and_fedavg_fusion_sends_no_h(graph):
    algo, _, transcript = build("fedgl", tiny_config(), graph)
    algo.train_round(0)
    assert sorted(algo.server_ids) == ["edge-0"] and algo.training().trace_weight == 0
    tags = {e.tag for e in transcript.entries}
    assert H_TAG in tags and PATCH_TAG in tags and SERVER_MODEL_TAG not in tags
    fusion, _, t2 = build("fedavg-fusion", tiny_config(), graph)
    fusion.train_round(0)
    assert not {H_TAG, PATCH_TAG} & {e.tag for e in t2.entries}


def test_h_protection_perturbs_the_upload_and_reports_its_epsilon(graph):
    cfg = tiny_config(spreadfgl={"h_mechanism": "gaussian", "h_noise": 2.0, "h_rows": 0.5})
    algo, _, transcript = build("fedgl", cfg, graph)
    for r in range(2):
        algo.train_round(r)
    client = next(iter(algo.clients.values()))
    sent = [e.payload().array("h") for e in transcript.sent_by(client.party_id) if e.tag == H_TAG]
    assert len(sent) == 2 and len(sent[0]) == round(0.5 * client.num_own)
    assert (sent[0] < 0).any()  # noise: no longer a probability vector
    privacy = algo.privacy()
    assert privacy["h_uploads"] == 2 and privacy["h_epsilon"] > 0
    assert privacy["epsilon"] == privacy["h_epsilon"] and "edge server" in privacy["adversary"]
    rr = build("fedgl", tiny_config(spreadfgl={"h_mechanism": "rr", "h_epsilon": 0.5}), graph)[0]
    rr.train_round(0)
    assert rr.privacy()["h_epsilon"] == pytest.approx(0.5)


def test_within_server_aggregation_runs_through_the_stack(graph):
    algo, _, transcript = build("spreadfgl", tiny_config(protocol=["secagg", "clip_noise"]), graph)
    algo.train_round(0)
    assert "secagg/masked-input" in {e.tag for e in transcript.entries}
    assert (
        algo.privacy()["epsilon"] > 0
        and algo.protection()["model updates (clients -> edge server)"] == "clip_noise+secagg"
    )
    with pytest.raises(ConfigError, match="Eq. 16"):  # checked before any work
        algorithm_class("spreadfgl").check_stack(tiny_config(protocol=["ckks"]))
    ckks, _, _ = build("fedgl", tiny_config(protocol=["ckks"]), graph)
    ckks.train_round(0)
    assert ckks.servers["edge-0"].params is None  # the server never learns the model
    preds = ckks.executor.map(list(ckks.clients), EdgeClient.predict)
    assert all(len(p["test"][0]) == len(p["test"][1]) for p in preds)


def test_mean_reduction_divides_all_of_eq15_by_the_labelled_nodes(graph):
    """Eq. 15 averaged: the CE and the trace term both divided by n_L, so λ keeps its
    weight against the cross-entropy (the mean loss times n_L is the summed loss)."""
    losses = {}
    for reduction in ("sum", "mean"):
        cfg = tiny_config(spreadfgl={"loss_reduction": reduction, "trace_weight": 3.0})
        algo, _, _ = build("spreadfgl", cfg, graph)
        client = next(c for c in algo.clients.values() if int(c.masks["train"].sum()) > 1)
        client.model.eval()  # no dropout: the two losses see the same forward pass
        losses[reduction] = (float(client._loss().detach()), int(client.masks["train"].sum()))
    (total, n), (mean, _) = losses["sum"], losses["mean"]
    assert abs(mean * n - total) < 1e-4 * max(1.0, abs(total))


def test_own_client_links_become_real_edges_and_zero_rows_keep_only_the_hubs(graph):
    """The two mechanism diagnostics: §III-D's literal reading (potential links only inside
    the client, added as real edges: no generated row travels) and featureless virtual
    nodes (the patch's edges kept, its rows zeroed)."""
    literal = tiny_config(spreadfgl={"candidates": "own_client", "local_links": "edge"})
    algo, _, transcript = build("fedgl", literal, graph)
    algo.train_round(0)
    for cid, client in algo.clients.items():
        (patch,) = [e.payload() for e in transcript.view(cid).entries if e.tag == PATCH_TAG]
        links = patch.array("links")
        assert (links <= -2).any() and not (links >= 0).any()  # own positions only
        assert client.feats.num_rows == client.num_own and client.patch.shape[1] > 0
    hubs, _, _ = build("fedgl", tiny_config(spreadfgl={"generated_scale": "zero"}), graph)
    hubs.train_round(0)
    for client in hubs.clients.values():
        virtual = client.feats.num_rows - client.num_own
        assert virtual > 0 and client.patch.shape[1] > 0
        assert not np.abs(client.blocks[0]).any()
