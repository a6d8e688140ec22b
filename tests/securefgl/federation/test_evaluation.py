"""Evaluation as summed counts: the same metrics as from the pooled pairs, and under
``secure_evaluation`` the server sees only SecAgg messages, yet reports the same numbers."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import run_experiment
from securefgl.experiment.graph_world import client_mean_metrics
from securefgl.experiment.metrics import pooled_metrics
from securefgl.experiment.runner import EVALUATION_REPLIES, load_graph, run_single
from securefgl.federation import SERVER, Transcript
from securefgl.federation.evaluation import (
    SecureEvaluation,
    count_vector,
    split_counts,
    vector_size,
)
from securefgl.federation.party import PartyError
from securefgl.federation.transcript import EVALUATION


def _f1(y_true, y_pred, classes, true_only=False):
    """Macro-F1 straight from the pairs (scikit-learn's definition)."""
    scores = []
    for c in classes:
        if true_only and not (y_true == c).any():
            continue
        if not true_only and not ((y_true == c) | (y_pred == c)).any():
            continue
        tp = ((y_true == c) & (y_pred == c)).sum()
        scores.append(2 * tp / ((y_true == c).sum() + (y_pred == c).sum()))
    return float(np.mean(scores)) if scores else float("nan")


@st.composite
def clients(draw):
    k = draw(st.integers(2, 4))
    out = []
    for _ in range(k):
        n = draw(st.integers(0, 12))
        y = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
        q = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
        out.append({"val": (y, q), "test": (y[::-1].copy(), q)})
    return out


@settings(max_examples=60, deadline=None)
@given(clients())
def test_metrics_from_counts_are_the_metrics_of_the_pooled_pairs(per_client):
    out = pooled_metrics(per_client, 3)
    graph = client_mean_metrics(per_client, 3)
    for split in ("val", "test"):
        parts = [p[split] for p in per_client]
        y, q = np.concatenate([t for t, _ in parts]), np.concatenate([p for _, p in parts])
        if len(y):
            assert out[f"{split}_acc"] == pytest.approx(float((y == q).mean()))
            assert out[f"{split}_f1"] == pytest.approx(_f1(y, q, range(3)))
            assert graph[f"pooled_{split}_acc"] == pytest.approx(float((y == q).mean()))
        each = [(t, p) for t, p in parts if len(t)]
        if each:
            acc = np.mean([(t == p).mean() for t, p in each])
            assert out[f"client_mean_{split}"] == pytest.approx(acc)
            assert graph[f"{split}_acc"] == pytest.approx(acc)
            f1 = np.mean([_f1(t, p, range(3)) for t, p in each])
            assert out[f"client_mean_{split}_f1"] == pytest.approx(f1)
            assert graph[f"{split}_f1"] == pytest.approx(f1)
            true_f1 = np.mean([_f1(t, p, range(3), True) for t, p in each])
            assert out[f"client_mean_{split}_true_f1"] == pytest.approx(true_f1)
        else:
            assert f"client_mean_{split}" not in out and f"{split}_acc" not in graph


def test_a_count_vector_has_one_layout_whatever_the_splits():
    vec = count_vector({"test": (np.array([0, 1]), np.array([0, 0]))}, 2)
    assert vec.shape == (vector_size(2),)
    counts = split_counts(vec, 2)
    assert counts["train"].reported == 0 and counts["val"].reported == 0
    assert counts["test"].confusion.tolist() == [[1, 0], [1, 0]]
    with pytest.raises(ValueError, match="entries"):
        split_counts(vec[:-1], 2)


def _run(algorithm, secure, threat="honest-but-curious", **changes):
    config = ExperimentConfig(
        **{"dataset": "csbm", "csbm": {"num_nodes": 300}, "clients": 3, "rounds": 2,
           "eval_every": 1, "algorithms": [algorithm], "secure_evaluation": secure,
           "protocol": {"stack": ["secagg"], "threat_model": threat}, **changes},
    )  # fmt: skip
    transcript = Transcript()
    result = run_single(config, algorithm, 0, load_graph(config), progress=False,
                        transcript=transcript)  # fmt: skip
    return result, transcript


@pytest.mark.parametrize("threat", ["honest-but-curious", "malicious"])
def test_a_secure_evaluation_reports_the_same_metrics_and_sends_only_secagg(threat):
    plain, plain_transcript = _run("fedavg", False, threat)
    secure, transcript = _run("fedavg", True, threat)
    for p, s in zip(plain.history, secure.history, strict=True):
        for key in ("test_acc", "val_acc", "test_f1", "val_f1"):
            assert s[key] == p[key]  # exact: the counts are integers
        assert s["client_mean_test"] == pytest.approx(p["client_mean_test"], abs=1e-6)
    assert not [e for e in plain_transcript.entries if e.family == EVALUATION]  # the oracle
    sent = [e for e in transcript.entries if e.family == EVALUATION]
    assert sent and all(e.tag.startswith("secagg/") for e in sent)
    # what reaches the server: masked inputs (and keys, shares to route, unmask replies)
    masked = [e.payload() for e in sent if e.receiver == SERVER and e.tag == "secagg/masked-input"]
    assert len(masked) == 3 * 2  # 3 clients, 2 evaluations
    assert secure.protection[EVALUATION_REPLIES].startswith("secagg sum")
    assert plain.protection[EVALUATION_REPLIES].startswith("plain")


def test_only_hosted_clients_take_part_in_a_later_sum():
    secure = SecureEvaluation(None, None, SERVER, "x", 2, clients=["client-0", "client-1"])  # type: ignore[arg-type]
    with pytest.raises(PartyError, match="among the hosted clients"):
        secure.counts(0, None, ["client-0", "client-2"])  # type: ignore[arg-type]


def test_the_first_edge_server_opens_spreadfgls_sum():
    plain, _ = _run("spreadfgl", False, edge_servers=2, clients=4)
    secure, transcript = _run("spreadfgl", True, edge_servers=2, clients=4)
    assert secure.final["test_acc"] == plain.final["test_acc"]
    receivers = {e.receiver for e in transcript.entries if e.family == EVALUATION}
    assert "edge-0" in receivers and SERVER not in receivers


def test_a_graph_task_evaluates_securely_alike():
    base = {"task": "graph", "dataset": "synthetic-graphs", "clients": 3, "rounds": 2,
            "graph": {"synthetic": {"num_graphs": 60, "max_nodes": 10}, "batch_size": 16},
            "algorithms": ["fedavg"]}  # fmt: skip
    finals = [run_experiment(ExperimentConfig(**base, secure_evaluation=s), progress=False)
              .runs[0].final for s in (False, True)]  # fmt: skip
    assert finals[1]["pooled_test_acc"] == finals[0]["pooled_test_acc"]
    assert finals[1]["test_acc"] == pytest.approx(finals[0]["test_acc"], abs=1e-6)


def test_a_lone_client_cannot_sum_and_references_are_named(caplog):
    with pytest.raises(ConfigError, match="2 or more clients"):
        ExperimentConfig(clients=1, secure_evaluation=True)
    from securefgl.algorithms.registry import check_config

    with caplog.at_level(logging.WARNING):
        check_config(ExperimentConfig(algorithms=["fedavg", "local", "central"],
                                      secure_evaluation=True))  # fmt: skip
    assert "does not apply to local, central" in caplog.text


def test_a_client_hosts_once_evaluates_each_round_once_and_only_trusted_methods():
    from securefgl.algorithms.fedavg.parties import RoundClient
    from securefgl.federation.evaluation import EvaluationHost
    from securefgl.federation.party import Target

    config = ExperimentConfig(csbm={"num_nodes": 300}, clients=3, rounds=1,
                              algorithms=["fedavg"], secure_evaluation=True)  # fmt: skip
    run = run_single(config, "fedavg", 0, load_graph(config), progress=False, keep_state=True)
    client = run.state.algorithm.clients["client-0"]
    host = EvaluationHost.of(client)
    assert isinstance(host, EvaluationHost) and host.state is not None  # hosted by the run
    with pytest.raises(PartyError, match="hosted already"):  # no second cohort to open
        host.host({})
    with pytest.raises(PartyError, match="no second evaluation of round 0"):
        host.submit(0)  # the run evaluated its round 0
    fresh = EvaluationHost(client)
    spec = SecureEvaluation(None, None, SERVER, "x", 2, clients=["client-0", "client-1"])  # type: ignore[arg-type]
    wire = spec.spec(Target.of(RoundClient.predict))
    with pytest.raises(PartyError, match="outside securefgl"):
        fresh.host({**wire, "predict": [["os:PathLike"], "x"]})
    fresh.host(wire)


def test_under_a_malicious_server_every_sum_holds_every_client(monkeypatch):
    """A silent client stops the evaluations (named in the result), not the run: a sum
    without it would let the server subtract it from one with it."""
    from securefgl.algorithms.fedavg.algorithm import FedAvg
    from securefgl.experiment.report import silent_lines
    from securefgl.experiment.runner import ExperimentResult

    train_round = FedAvg.train_round

    def silence_client_2(self, round_idx):
        if round_idx == 1:
            self.executor.silent = frozenset({"client-2"})
        return train_round(self, round_idx)

    monkeypatch.setattr(FedAvg, "train_round", silence_client_2)
    secure, transcript = _run("fedavg", True, "malicious", rounds=3, protocol={
        "stack": ["secagg"], "threat_model": "malicious", "min_cohort": 2})  # fmt: skip
    assert not [e for e in transcript.entries if e.family == EVALUATION and e.round > 0]
    assert secure.silent == {"client-2": 1} and secure.refused_evaluations == [1, 2]
    assert "test_acc" in secure.history[0] and "test_acc" not in secure.final
    note = silent_lines(ExperimentResult(ExperimentConfig(), [secure]))
    assert "no metrics in round(s) 1, 2" in " ".join(note)
