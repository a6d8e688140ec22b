"""FedSage+: NeighGen's targets and losses, the cross-client loss through the channel, and
no client holding another client's features."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from securefgl.algorithms.common.edge.client import EdgeClient
from securefgl.algorithms.fedsage.clients import ANSWER_TAG, QUERY_TAG, NeighGenState
from securefgl.algorithms.fedsage.neighgen import greedy_loss, impair
from securefgl.algorithms.fedsage.settings import FedSageSettings
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
def plus(graph):
    algo, views, transcript = build("fedsage+", tiny_config(), graph)
    algo.train_round(0)
    return algo, views, transcript


def test_impaired_graph_counts_and_features_of_hidden_neighbours():
    # path 0-1-2-3, node 2 hidden: node 1 lost one neighbour (2), node 3 lost one
    x = sp.csr_matrix(np.arange(12, dtype=np.float32).reshape(4, 3))
    edges = np.array([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    train = np.array([True, True, False, True])
    test = np.zeros(4, bool)
    g = impair(x, edges, train, test, FedSageSettings(hide_fraction=0.99, num_pred=2),
               np.random.default_rng(0))  # fmt: skip
    assert g.keep.tolist() == [0, 1, 3] and g.missing.tolist() == [0, 1, 1]
    np.testing.assert_array_equal(g.targets[1, 0], x[2].toarray()[0])  # node 1's hidden nbr
    assert not g.targets[1, 1].any() and not g.targets[0].any()
    assert g.edges.tolist() == [[0, 1], [1, 0]]


def test_greedy_loss_matches_the_official_loop():
    rng = np.random.default_rng(0)
    B, P, d = 4, 3, 5
    gen = torch.as_tensor(rng.normal(size=(B, P, d)), dtype=torch.float32)
    true = rng.normal(size=(B, P, d)).astype(np.float32)
    pred, tcount = np.array([0, 1, 3, 2]), np.array([2, 0, 3, 1])
    cap = float((gen**2).mean())
    loss = np.full((B, P), cap)
    for i in range(B):
        for j in range(min(P, pred[i])):
            for k in range(min(P, tcount[i])):
                loss[i, j] = min(loss[i, j], float(((gen[i, j].numpy() - true[i, k]) ** 2).mean()))
    assert float(greedy_loss(gen, true, pred, tcount)) == pytest.approx(loss.mean(), rel=1e-5)


def test_cross_client_loss_travels_client_to_client_and_answers_are_gradients(plus, graph):
    algo, views, transcript = plus
    queries = [e for e in transcript.entries if e.tag == QUERY_TAG]
    answers = [e for e in transcript.entries if e.tag == ANSWER_TAG]
    assert queries and len(queries) == len(answers)
    assert all(e.round == -1 and e.sender.startswith("client") and e.receiver.startswith("client")
               for e in queries + answers)  # fmt: skip
    q, a = queries[0], next(e for e in answers if e.sender == queries[0].receiver
                            and e.receiver == queries[0].sender)  # fmt: skip
    g, grad = q.payload().array("g"), a.payload().array("grad")
    x = algo.clients[q.receiver].x_own.toarray()
    nearest = ((g[:, None, :] - x[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_allclose(grad, 2 * (g - x[nearest]), rtol=1e-4, atol=1e-5)


def test_mended_graphs_and_no_client_holds_another_clients_features(plus, graph):
    algo, _, _ = plus
    rows = {tuple(r) for r in graph.x.numpy().round(5).tolist()}
    for cid, client in algo.clients.items():
        assert client.feats.num_rows >= client.num_own
        own = {tuple(r) for r in client.x_own.toarray().round(5).tolist()}
        for arr in reachable_arrays(client):
            if arr.ndim == 2 and arr.shape[1] == graph.num_features and len(arr):
                found = {tuple(r) for r in arr.round(5).tolist()} & (rows - own)
                assert not {r for r in found if any(r)}, cid
    preds = algo.executor.map(list(algo.clients), EdgeClient.predict)
    assert sum(len(p["test"][0]) for p in preds) == int(graph.num_nodes * 0.2 + 0.5)


def test_noisy_answers(graph):
    cfg = tiny_config(fedsage={**tiny_config().fedsage.__dict__, "cross_clip": 1.0,
                               "cross_noise": 3.0})  # fmt: skip
    algo, _, transcript = build("fedsage+", cfg, graph)
    grads = np.vstack([e.payload().array("grad") for e in transcript.entries
                       if e.tag == ANSWER_TAG])  # fmt: skip
    assert grads.std() > 2.0  # noise of std 3·C dominates the clipped rows
    assert "no ε" in algo.protection()["fGen queries and answered gradients (client <-> client)"]
    assert any(isinstance(r, NeighGenState) for r in algo.clients["client-0"].roles())


def test_classifier_loss_generates_only_the_rows_the_mended_graph_uses(plus):
    """fGen runs on the training rows and on the other nodes with ñ_v > 0; the loss and
    its gradients equal generating every node's rows (noise and dropout off)."""
    from securefgl.algorithms.fedsage.neighgen import counts, mended

    algo, _, _ = plus
    state = algo.clients["client-0"].neighgen
    st, g, net = state.settings, state.graph, state.net
    net.eval()  # no dropout
    state._noise = lambda n: torch.zeros(n, st.latent)  # no input noise
    saved = {k: v.clone() for k, v in net.dgen.state_dict().items()}
    with torch.no_grad():  # ñ_v = 2 for every node, whatever the tiny run learned
        net.dgen.weight.zero_()
        net.dgen.bias.fill_(2.0)
    calls = []
    generate = net.generate
    net.generate = lambda z, noise: calls.append(len(z)) or generate(z, noise)
    try:

        def reference() -> torch.Tensor:  # every node generated, training rows from ``gen``
            z = net.embed(g.feats, g.prop)
            gen = generate(z[g.train], torch.zeros(len(g.train), st.latent))
            all_gen = generate(z, torch.zeros(len(z), st.latent))
            all_gen = all_gen.index_copy(0, torch.as_tensor(g.train), gen)
            feats, prop, _, _ = mended(g.x, g.edges, all_gen, counts(net.degree(z), st.num_pred))
            logits = net.classifier(feats, prop)[torch.as_tensor(g.train)]
            y = state.y[torch.as_tensor(g.keep[g.train])]
            return st.lambda_c * torch.nn.functional.cross_entropy(logits, y)

        def ours() -> torch.Tensor:  # our loss minus its greedy and degree terms
            z = net.embed(g.feats, g.prop)
            gen = generate(z[g.train], torch.zeros(len(g.train), st.latent))
            total = state._local_losses(z, gen, with_degree=False)
            pred = counts(net.degree(z[g.train]), st.num_pred)
            return total - st.lambda_f * greedy_loss(gen, g.targets, pred, g.missing[g.train])

        losses, grads = [], []
        for f in (reference, ours):
            net.zero_grad()
            loss = f()
            loss.backward()
            losses.append(float(loss))
            grads.append(torch.cat([p.grad.flatten() for p in net.fgen_parameters()]))
        count = counts(net.degree(net.embed(g.feats, g.prop)), st.num_pred)
        with torch.no_grad():  # ñ_v = 0 everywhere: no other rows are generated
            net.dgen.bias.fill_(-1.0)
        z = net.embed(g.feats, g.prop)
        state._local_losses(z, generate(z[g.train], torch.zeros(len(g.train), st.latent)), False)
    finally:
        del net.generate
        del state._noise
        net.dgen.load_state_dict(saved)
        net.train()
    assert (count == 2).all() and calls == [len(g.keep) - len(g.train)] and len(g.train)
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_accuracy_on_another_graph_uses_the_same_model_and_propagation(graph):
    """``predict_on`` (FedEgo's global test for the edge family) on a client's own,
    unmended graph gives that client's own accuracy over all its nodes."""
    from torch_geometric.data import Data

    algo, views, _ = build("fedsage", tiny_config(), graph)
    algo.train_round(0)
    algo.predict()  # every client evaluates with the server model
    for v in views:
        client = algo.clients[f"client-{v.client_id}"]
        with torch.no_grad():
            own = (client._logits().argmax(dim=-1).numpy() == v.y.numpy()).mean()
        got = client.predict_on(v.x.numpy(), v.edge_index.numpy(), v.y.numpy())
        assert got == pytest.approx(own)
    first = views[0]
    scores = algo.predict_global(Data(x=first.x, edge_index=first.edge_index, y=first.y))
    assert len(scores) == len(views) and all(0.0 <= s <= 1.0 for s in scores)
