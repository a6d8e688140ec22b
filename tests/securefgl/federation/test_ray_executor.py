"""The Ray executor: parties in actor processes, the same result as the local executor,
each actor holding only its own clients' data."""

import time

import numpy as np
import pytest
import torch

from protocols.base import ProtocolError
from securefgl.algorithms.fedavg.algorithm import FedAvg
from securefgl.algorithms.fedavg.parties import FedAvgServer
from securefgl.algorithms.registry import check_config
from securefgl.config import ExperimentConfig
from securefgl.experiment.runner import draw_world, load_graph, run_single
from securefgl.federation import Call, Channel, Party, PartyError, Target, Transcript
from securefgl.federation.federation import Federation
from securefgl.federation.recipes import party_builder, recipe
from securefgl.federation.stack import build_stack

ray = pytest.importorskip("ray")  # a dependency: installed by `make test`
from securefgl.federation.ray_executor import PartyTimeoutError, RayExecutor  # noqa: E402

SMALL = {"num_nodes": 400, "num_features": 12, "feature_signal": 0.3, "homophily": 0.8}
GRAPHS = {
    "task": "graph", "dataset": "synthetic-graphs", "clients": 4, "rounds": 2,
    "graph": {"synthetic": {"num_graphs": 80, "max_nodes": 10}, "batch_size": 16},
}  # fmt: skip


def _config(**kw):
    base = dict(csbm=SMALL, clients=4, partition="random", rounds=6, eval_every=3, hidden=8)
    return check_config(ExperimentConfig(**{**base, **kw}))


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


class Sleeper(Party):
    def __init__(self, party_id: str) -> None:
        self.party_id = party_id

    def nap(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


@party_builder
def sleeper(party_id: str) -> Sleeper:
    return Sleeper(party_id)


def _run(cfg, transcript, algorithm="fedavg"):
    torch.set_num_threads(cfg.threads)  # as run_experiment: the Ray workers use cfg.threads
    data = load_graph(cfg)
    return run_single(cfg, algorithm, 0, data, progress=False, transcript=transcript)


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("fedavg", {"protocol": ["secagg"]}),
        (
            "fedstruct",
            {
                "protocol": ["secagg"], "cross_edges": "known", "dropout": 0.5,
                "fedstruct": {"sum_mode": "masked", "structure_hops": 2, "nsf_dim": 8,
                              "structure_hidden": [8], "feature_hidden": [8]},
            },
        ),
        ("fedgcn", {"protocol": ["secagg"], "cross_edges": "known"}),
        (
            "spreadfgl",
            {
                "protocol": {"stack": ["secagg"], "threat_model": "malicious"},  # a PKI per
                "clients": 6, "edge_servers": 2,  # edge server's stack
                "secure_evaluation": True,  # summed for the first edge server
                "spreadfgl": {"interval": 2, "local_steps": 2, "top_k": 3, "ae_iterations": 2},
            },
        ),
        (
            "fedsage+",
            {"fedsage": {"gen_epochs": 2, "fed_gen_epochs": 2, "gen_hidden": [16],
                         "cross_queries": 4, "local_steps": 2, "latent": 8,
                         "encoder_hidden": 8}},
        ),
        ("fedgls", {"protocol": ["secagg"], "clients": 6}),
        ("gpfl", {**GRAPHS, "gpfl": {"gae_epochs": 5, "sums": "masked", "similarity": "ckks"}}),
        ("fedavg", {**GRAPHS, "protocol": ["secagg"], "secure_evaluation": True}),
    ],
)  # fmt: skip
def test_ray_gives_the_local_result_and_the_same_messages(algorithm, settings):
    graphs = settings.get("task") == "graph"
    cfg = (
        check_config(ExperimentConfig(**settings, algorithms=[algorithm]))
        if graphs
        else _config(**settings)
    )
    runs = {}
    for executor in ("local", "ray"):
        transcript = Transcript()
        result = _run(cfg.replace(executor=executor, workers=2), transcript, algorithm)
        entries = [(e.round, e.sender, e.receiver, e.tag, e.nbytes) for e in transcript.entries]
        runs[executor] = (result, entries)
    (local, local_msgs), (remote, remote_msgs) = runs["local"], runs["ray"]
    assert remote.final == local.final
    assert [h.get("test_acc") for h in remote.history] == [h.get("test_acc") for h in local.history]
    assert [m[:4] for m in remote_msgs] == [m[:4] for m in local_msgs] and len(local_msgs) > 50
    for (*_, tag, ours), (*_, _, theirs) in zip(local_msgs, remote_msgs, strict=True):
        if "ckks" in tag or tag.startswith("gram/"):  # CKKS serialisations vary in size
            assert abs(ours - theirs) <= 0.01 * ours
        else:
            assert ours == theirs, tag
    if algorithm in ("fedstruct", "fedgcn"):  # the masked pre-training sums crossed too
        assert any(tag == "secure-sum/contribution" for *_, tag, _ in local_msgs)


def _ray_fedavg(cfg, workers=2, channel=None):
    """FedAvg set up on ``workers`` Ray workers: (algorithm, federation)."""
    torch.manual_seed(0)  # the initial model, drawn in the driver (as the runner does)
    data = load_graph(cfg)
    _, _, views, _ = draw_world(cfg, 0, data)
    stack = build_stack(cfg, cfg.clients, f"ray-test-{cfg.protocol.label}")
    options = {"workers": workers, "co_host": cfg.ray_co_host}
    federation = Federation(views, channel or Channel(), stack, 0, executor="ray",
                            executor_options=options)  # fmt: skip
    algo = FedAvg(cfg)
    algo.setup(federation)
    return algo, federation


def test_each_actor_holds_only_its_own_clients_features():
    algo, federation = _ray_fedavg(_config(executor="ray", workers=2))
    views = federation.views
    try:
        algo.train_round(0)
        ex = algo.executor
        assert all(algo.clients[c] is None for c in algo.clients)  # nothing in the driver
        rows = {
            f"client-{v.client_id}": {r.tobytes() for r in v.x.numpy().astype(np.float32)}
            for v in views
        }
        import hashlib

        digests = {c: {hashlib.sha256(b).hexdigest() for b in r} for c, r in rows.items()}
        for w, worker in enumerate(ex.workers):
            held = set(ray.get(worker.held.remote()))
            seen = set(ray.get(worker.float_row_digests.remote()))
            mine = {c for c in digests if ex.home[c] == w}
            assert mine <= held
            for client, d in digests.items():
                if client in mine:
                    assert d <= seen  # the scan does find a client's own features
                else:
                    assert not d & seen, f"worker {w} holds features of {client}"
    finally:
        federation.close()


def test_the_server_and_the_key_authority_never_share_a_clients_process():
    """Each has a worker (a process) of its own unless the user asks to co-host."""
    cfg = _config(protocol={"stack": ["ckks"], "threat_model": "malicious"}, rounds=1)
    for co_host in (False, True):
        algo, federation = _ray_fedavg(cfg.replace(ray_co_host=co_host))
        try:
            ex = algo.executor
            pids = {p: ray.get(ex.workers[w].where.remote())[1] for p, w in ex.home.items()}
            clients = {pids[c] for c in algo.clients}
            apart = pids["server"] not in clients and pids["key-authority"] not in clients
            assert apart != co_host
            assert co_host or pids["server"] != pids["key-authority"]
        finally:
            federation.close()


def test_parties_built_in_the_driver_are_refused_clearly():
    with pytest.raises(PartyError, match="local executor"):
        RayExecutor({"server": Sleeper("server")}, workers=1)  # type: ignore[dict-item]


def test_the_malicious_server_model_runs_on_ray_each_worker_holding_its_parties_keys():
    cfg = _config(protocol={"stack": ["ckks"], "threat_model": "malicious"}, rounds=2, eval_every=1)
    local = _run(cfg, Transcript())
    algo, federation = _ray_fedavg(cfg)
    try:
        algo.train_round(0)
        ex = algo.executor
        for w, worker in enumerate(ex.workers):
            hosted = {pid for pid, home in ex.home.items() if home == w}
            keys = set(ray.get(worker.signing_keys.remote()))
            assert keys and keys <= hosted  # no other party's signing key is here
            assert keys == hosted & set(federation.stack.pki.identities)
    finally:
        federation.close()
    remote = _run(cfg.replace(executor="ray", workers=2), Transcript())
    assert remote.final == local.final


def test_a_party_that_does_not_answer_in_time_is_named():
    ex = RayExecutor({"slow": recipe(sleeper, party_id="slow")}, workers=1, party_timeout=1.0)
    try:
        assert ex.call([Call.to("slow", Sleeper.nap, 0.0)]) == [0.0]
        with pytest.raises(PartyTimeoutError, match="slow"):
            ex.call([Call.to("slow", Sleeper.nap, 30.0)])
    finally:
        ex.shutdown()


def test_errors_inside_a_party_reach_the_driver_with_the_party_named():
    ex = RayExecutor({"p": recipe(sleeper, party_id="p")}, workers=1)
    try:
        with pytest.raises(PartyError, match="p.Sleeper.nap"):
            ex.call([Call.to("p", Sleeper.nap, "not a number")])  # type: ignore[arg-type]
        with pytest.raises(PartyError, match="no such method"):
            ex.call([Call("p", Target((Sleeper,), "fly"))])  # a method the class lacks
    finally:
        ex.shutdown()


#: 6 clients on 3 workers (server, c0 .. c5 round-robin): worker 2 holds client-1 and
#: client-4, so killing it leaves 4 survivors, SecAgg's default threshold for 6
FAULTS = {"clients": 6, "workers": 3}


def _kill_and_wait(actor, timeout: float = 60.0) -> None:
    """``ray.kill`` only requests the kill: a call sent right after it may still run.
    Wait until the actor is really gone, so the phase after it meets a dead worker."""
    ray.kill(actor)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.held.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed Ray worker is still answering")


def _kill_worker_before(algo, phase, worker):
    """Kill ``worker``'s process just before the protocol phase ``phase`` runs."""
    ex, make = algo.executor, algo.executor.phases

    def phases(protocol):
        calls = make(protocol)

        class Killing(type(calls)):
            def batch(self, method, requests):
                if method == phase and ex.workers[worker] is not None:
                    _kill_and_wait(ex.workers[worker])
                return super().batch(method, requests)

        return Killing(calls.executor, calls.types)

    ex.phases = phases


def _server_model(algo):
    sent = algo.executor.call([Call.to("server", FedAvgServer.broadcast, 0, ["client-1"])])[0]
    return sent[0].payload.array("params")


def test_a_killed_worker_s_clients_drop_out_and_secagg_recovers_the_survivors_mean():
    """Worker 2 dies mid-round (before the clients send their updates): its clients are
    dropped, SecAgg reconstructs their masks, and the server gets the survivors' mean,
    the very mean plain aggregation gives when the same clients vanish."""
    means = {}
    for protocol, phase in (("plain", "send_update"), ("secagg", "masked_input")):
        algo, federation = _ray_fedavg(_config(protocol=[protocol], clients=6), FAULTS["workers"])
        try:
            _kill_worker_before(algo, phase, worker=2)
            algo.train_round(0)
            assert algo.executor.silent == {"client-2", "client-5"}  # clients i: worker i % 3
            assert algo._live() == ["client-0", "client-1", "client-3", "client-4"]
            means[protocol] = _server_model(algo)
            algo.train_round(1)  # training goes on with the survivors
            assert np.isfinite(_server_model(algo)).all()
        finally:
            federation.close()
    np.testing.assert_allclose(means["secagg"], means["plain"], atol=1e-5)


@pytest.mark.parametrize(
    "options, phase, message",
    [
        ({"protocol": {"stack": ["secagg"], "secagg_threshold": 5}}, "masked_input",
         "went silent"),
        ({"protocol": ["ckks"]}, "open_mean", "ckks needs every client"),
    ],
    ids=["secagg-below-threshold", "ckks"],
)
def test_a_round_that_cannot_survive_the_crash_aborts_saying_why(options, phase, message):
    algo, federation = _ray_fedavg(_config(clients=6, **options), FAULTS["workers"])
    try:
        _kill_worker_before(algo, phase, worker=2)
        with pytest.raises(ProtocolError, match=message):
            algo.train_round(0)
    finally:
        federation.close()


@pytest.mark.parametrize(("method", "aggregation", "row_dp"),
                         [("fesog", "plain", 0.0), ("fedgnn", "ideal", 0.0),
                          ("fesog", "ideal", 1.0)])  # fmt: skip
def test_the_recommendation_path_gives_the_local_result_on_ray(method, aggregation, row_dp):
    from securefgl.algorithms.recommendation.ldp import LDPConfig
    from securefgl.algorithms.recommendation.settings import RowDPConfig, aggregating
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import synthetic_ratings

    views = ClientViews.from_data(synthetic_ratings(n_users=90, n_items=60, per_user=10))
    ldp = LDPConfig("laplace", 0.3, 0.1)
    runs = {}
    for executor in ("local", "ray"):
        cfg = RecConfig(
            method=method, **aggregating(aggregation), rounds=6, eval_every=2, users_per_round=40,
            pseudo_items=4, expand_every=3, ldp=ldp, seeded_noise=True, executor=executor,
            row_dp=RowDPConfig(row_dp),
        )  # fmt: skip
        with FedRecTrainer(views, cfg) as tr:
            res = tr.run()
            msgs = [(e.round, e.sender, e.receiver, e.tag, e.nbytes)
                    for e in tr.channel.transcript.entries]  # fmt: skip
        runs[executor] = (res, msgs)
    (local, local_msgs), (remote, remote_msgs) = runs["local"], runs["ray"]
    assert remote.test_rmse == local.test_rmse
    assert [h["val_rmse"] for h in remote.history] == [h["val_rmse"] for h in local.history]
    assert remote.privacy["epsilon_max_user"] == local.privacy["epsilon_max_user"] > 0
    assert remote.privacy["guarantees"] == local.privacy["guarantees"]
    assert remote_msgs == local_msgs and len(local_msgs) >= 18
    receivers = {m[2] for m in local_msgs}
    assert {"users-0", "users-1", "server"} <= receivers
    assert ("third_party" in receivers) == (method == "fedgnn")


def test_a_user_group_whose_worker_dies_drops_out_and_training_goes_on():
    from securefgl.algorithms.recommendation.trainer import FedRecTrainer, RecConfig
    from securefgl.data.rating_views import ClientViews
    from securefgl.data.ratings import synthetic_ratings

    views = ClientViews.from_data(synthetic_ratings(n_users=60, n_items=40, per_user=8))
    cfg = RecConfig(rounds=6, eval_every=3, users_per_round=30, pseudo_items=3,
                    executor="ray", workers=3)  # fmt: skip
    with FedRecTrainer(views, cfg) as tr:
        assert tr.executor.home == {"users-0": 0, "users-1": 1, "server": 3}
        tr.round(0)
        _kill_and_wait(tr.executor.workers[1])  # users-1's worker dies between rounds
        view = tr.round(1)
        assert tr.executor.silent == {"users-1"}
        assert (view.users % 2 == 0).all() and view.users.size > 0  # only users-0 trained
        res = tr.run()  # rounds go on; metrics cover the surviving group's users
    assert np.isfinite(res.test_rmse) and res.detail["silent_user_groups"] == ["users-1"]
    last = [e for e in tr.channel.transcript.entries if e.round == 5]
    assert last and {e.sender for e in last} | {e.receiver for e in last} <= {"server", "users-0"}


def test_payloads_go_from_actor_to_actor_never_through_the_driver():
    """The driver records each envelope's size and digest; the bytes stay with the actors
    (issue: the driver's link must not carry the federation's traffic)."""
    cfg = _config(executor="ray", workers=2, protocol=["secagg"])
    algo, federation = _ray_fedavg(cfg, channel=Channel(Transcript(store_payloads=False)))
    try:
        for r in range(2):
            algo.train_round(r)
        ex, entries = algo.executor, federation.channel.transcript.entries
        assert len(entries) > 20 and sum(e.nbytes for e in entries) > 10_000
        assert all(e.data is None and e.digest is not None and len(e.digest) == 64
                   for e in entries)  # fmt: skip
        assert ex.driver_fetched_bytes == 0
        assert ex.driver_put_bytes == 0  # FedAvg's driver sends no envelope of its own
    finally:
        federation.close()


def test_a_transcript_that_keeps_payloads_fetches_exactly_those_and_their_digests_match():
    import hashlib

    channel = Channel(Transcript(store_payloads=True))
    algo, federation = _ray_fedavg(_config(executor="ray", workers=2, protocol=["secagg"]),
                                   channel=channel)  # fmt: skip
    try:
        algo.train_round(0)
        entries = channel.transcript.entries
        assert all(hashlib.sha256(e.data).hexdigest() == e.digest for e in entries)
        assert algo.executor.driver_fetched_bytes == sum(e.nbytes for e in entries)
    finally:
        federation.close()


def test_a_worker_running_other_code_than_the_driver_refuses_to_start():
    from securefgl.federation.ray_executor import PartyWorker, code_digest

    PartyWorker(1, b"", code_digest())  # the driver's code: it starts
    with pytest.raises(RuntimeError, match="other code than the driver's"):
        PartyWorker(1, b"", "0" * 64)
