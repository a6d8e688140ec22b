"""Evaluation as counts, and their secure sum to the server.

A client's evaluation of a split reduces to its confusion counts and its own accuracy and
macro-F1 (:func:`count_vector`); every metric securefgl reports is a function of the sum
of these vectors over the clients (:func:`split_counts`, read by
:mod:`securefgl.experiment.metrics`). Summed in the clear, the replies tell the server each
client's label distribution and errors. With ``secure_evaluation`` the vectors go through
a SecAgg sum (Bonawitz et al., CCS 2017) in the run's threat model instead: each client
party hosts an :class:`EvaluationHost`, and the server learns only the total, the same
metrics, and who took part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.base import AggregationProtocol, Role, run_phases
from protocols.identity import HONEST_BUT_CURIOUS, KeyRegistry, Pki
from protocols.registry import make_transport
from protocols.secagg import SecAggClient, SecAggServer
from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor, PhaseCalls
from securefgl.federation.party import AttachedRole, Call, Party, PartyError, Target
from securefgl.federation.remote import check_trusted

#: the splits a count vector holds, in order
EVAL_SPLITS = ("train", "val", "test")
#: per split after the C x C confusion counts: clients that report the split, clients with
#: nodes (or graphs) in it, and the sums of those clients' accuracy, macro-F1 over the
#: classes in their true or predicted labels, and macro-F1 over their true labels
_TAIL = ("reported", "with_nodes", "acc_sum", "f1_sum", "true_f1_sum")
Predictions = Mapping[str, tuple[np.ndarray, np.ndarray]]


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts of (true class, predicted class), ``num_classes`` x ``num_classes``."""
    idx = np.asarray(y_true, dtype=np.int64) * num_classes + np.asarray(y_pred, dtype=np.int64)
    return np.bincount(idx, minlength=num_classes**2).reshape(num_classes, num_classes)


def confusion_f1(confusion: np.ndarray, true_classes_only: bool = False) -> float:
    """Unweighted mean of per-class F1 over the classes present in the true or predicted
    labels (scikit-learn's default), or only in the true labels; NaN with no counts."""
    if not confusion.sum():
        return float("nan")
    tp = np.diag(confusion).astype(float)
    support, predicted = confusion.sum(1), confusion.sum(0)
    present = support > 0 if true_classes_only else (support + predicted) > 0
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros_like(tp), where=present)
    return float(f1[present].mean())


def vector_size(num_classes: int) -> int:
    return len(EVAL_SPLITS) * (num_classes**2 + len(_TAIL))


def count_vector(predictions: Predictions, num_classes: int) -> np.ndarray:
    """One client's evaluation as a vector to sum (float64; counts are integers)."""
    parts = []
    for split in EVAL_SPLITS:
        confusion = np.zeros((num_classes, num_classes), dtype=np.int64)
        tail = np.zeros(len(_TAIL))
        if split in predictions:
            y_true, y_pred = predictions[split]
            confusion = confusion_matrix(y_true, y_pred, num_classes)
            tail[0] = 1
            if len(y_true):
                acc = float(np.trace(confusion) / confusion.sum())
                tail[1:] = (1, acc, confusion_f1(confusion), confusion_f1(confusion, True))
        parts += [confusion.ravel().astype(np.float64), tail]
    return np.concatenate(parts)


@dataclass(frozen=True)
class SplitCounts:
    """A split's evaluation summed over the clients (:data:`_TAIL`)."""

    confusion: np.ndarray
    reported: int
    with_nodes: int
    acc_sum: float
    f1_sum: float
    true_f1_sum: float

    @property
    def total(self) -> int:
        return int(self.confusion.sum())


def split_counts(total: np.ndarray, num_classes: int) -> dict[str, SplitCounts]:
    """The summed vector (:func:`count_vector`) by split; a fixed-point sum's counts are
    rounded to the integers they are."""
    total = np.asarray(total, dtype=np.float64)
    if total.shape != (vector_size(num_classes),):
        raise ValueError(f"an evaluation sum of {num_classes} classes has "
                         f"{vector_size(num_classes)} entries, got {total.shape}")  # fmt: skip
    out = {}
    for split, chunk in zip(EVAL_SPLITS, np.split(total, len(EVAL_SPLITS)), strict=True):
        confusion = np.rint(chunk[: num_classes**2]).astype(np.int64)
        reported, with_nodes, acc, f1, true_f1 = chunk[num_classes**2 :]
        out[split] = SplitCounts(
            confusion.reshape(num_classes, num_classes), round(reported), round(with_nodes),
            float(acc), float(f1), float(true_f1),
        )  # fmt: skip
    return out


def pooled_counts(per_client: Sequence[Predictions], num_classes: int) -> dict[str, SplitCounts]:
    """The clients' predictions summed in the clear (the simulator's oracle)."""
    total = np.zeros(vector_size(num_classes))
    for predictions in per_client:
        total += count_vector(predictions, num_classes)
    return split_counts(total, num_classes)


def evaluation_protocol(spec: Mapping[str, Any]) -> AggregationProtocol:
    """The SecAgg instance of a secure evaluation (:meth:`SecureEvaluation.spec`), made in
    each party's process: 64-bit ring (the counts need no bound), the run's threat model,
    its key registry as this process holds it; under a malicious server every client
    accepts only sums of every hosted client."""
    registry, threat = spec.get("registry"), str(spec["threat_model"])
    pki = None if registry is None else Pki.held(KeyRegistry.from_wire(registry))
    every = len(spec["clients"]) if threat != HONEST_BUT_CURIOUS else None
    return make_transport("secagg", str(spec["experiment_id"]), threat_model=threat, pki=pki,
                          min_cohort=every)  # fmt: skip


class EvaluationHost(AttachedRole):
    """A party's side of a secure evaluation: its SecAgg state, made by :meth:`host` (any
    party takes this role on at that call). It answers the SecAgg phases by passing them
    to the state (only the protocol's phase methods)."""

    def __init__(self, party: Party) -> None:
        super().__init__(party)
        self.state: SecAggClient | SecAggServer | None = None
        self._phases: frozenset[str] = frozenset()

    def host(self, spec: dict[str, Any]) -> None:
        """Make this party's state, once a run: a re-hosted sum could be opened over
        another cohort. A client evaluates with its own ``predict`` method, named here (in
        :data:`~securefgl.federation.remote.TRUSTED_MODULES`). Under a malicious server
        every sum must hold every hosted client: two sums of one model over cohorts that
        differ by a client would give that client's counts."""
        if self.state is not None:
            raise PartyError(f"{self.party.party_id}: the secure evaluation is hosted already")
        interfaces, method = spec["predict"]
        for path in interfaces:
            check_trusted(str(path), "evaluation method")
        protocol = evaluation_protocol(spec)
        parties = protocol.create_parties(spec["server"], spec["clients"], spec["dim"])
        pid = self.party.party_id
        state = parties.server if pid == spec["server"] else parties.clients.get(pid)
        if state is None:
            raise PartyError(f"{pid} takes no part in the secure evaluation")
        self.state = state  # type: ignore[assignment]
        self._predict = Target.from_wire(list(interfaces), str(method))
        self._num_classes = int(spec["num_classes"])
        self._last_round = -1
        self._phases = frozenset(p.method for p in (*protocol.setup_phases,
                                                    *protocol.round_phases))  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("_phases", ()):
            return getattr(self.state, name)
        raise AttributeError(name)

    def submit(self, round_idx: int) -> None:
        """Evaluate the current model and hand the counts to the sum; nothing is returned.
        One evaluation per round, in increasing rounds."""
        if not isinstance(self.state, SecAggClient):
            raise PartyError(f"{self.party.party_id}: no secure-evaluation client state")
        if round_idx <= self._last_round:
            raise PartyError(f"{self.party.party_id}: evaluated round {self._last_round} "
                             f"already; no second evaluation of round {round_idx}")  # fmt: skip
        self._last_round = round_idx
        predictions = self._predict.bind(self.party)()
        self.state.begin_round(round_idx, count_vector(predictions, self._num_classes), 1.0)

    def begin(self, round_idx: int, participants: list[str]) -> None:
        self._server.begin_round(round_idx, participants)

    def total(self) -> np.ndarray:
        """The sum of the participants' count vectors (the server's output)."""
        result = self._server.result()
        if result is None:
            raise PartyError("the secure evaluation delivered no sum")
        return np.asarray(result.mean, dtype=np.float64) * result.total_weight

    @property
    def _server(self) -> SecAggServer:
        if not isinstance(self.state, SecAggServer):
            raise PartyError(f"{self.party.party_id}: no secure-evaluation server state")
        return self.state


@dataclass
class SecureEvaluation:
    """Runs secure evaluations of ``clients``' predictions, summed for ``server``."""

    executor: Executor
    channel: Channel
    server: str
    experiment_id: str
    num_classes: int
    threat_model: str = HONEST_BUT_CURIOUS
    registry: dict[str, Any] | None = None
    #: the clients of the sums: those of the first evaluation (hosted then)
    clients: list[str] = field(default_factory=list)

    def spec(self, predict: Target[Any]) -> dict[str, Any]:
        return {
            "experiment_id": f"{self.experiment_id}|evaluation", "server": self.server,
            "clients": self.clients, "dim": vector_size(self.num_classes),
            "threat_model": self.threat_model, "registry": self.registry,
            "predict": list(predict.to_wire()), "num_classes": self.num_classes,
        }  # fmt: skip

    def counts(
        self, round_idx: int, predict: Target[Any], participants: Sequence[str]
    ) -> dict[str, SplitCounts]:
        """One evaluation: each of ``participants`` (hosted clients) runs ``predict`` on its
        own data and submits its counts; the server opens their sum."""
        calls = PhaseCalls(self.executor, (EvaluationHost,))
        if not self.clients:
            self.clients = list(participants)
            spec = self.spec(predict)
            self.executor.call([Call.to(p, EvaluationHost.host, spec)
                                for p in (*self.clients, self.server)])  # fmt: skip
            roles = {Role.SERVER: [self.server], Role.CLIENT: self.clients}
            run_phases(evaluation_protocol(spec).setup_phases, roles, calls,
                       self.channel.transmit)  # fmt: skip
        if not participants or not set(participants) <= set(self.clients):
            raise PartyError(f"a secure evaluation of {list(participants)} among the hosted "
                             f"clients {self.clients}")  # fmt: skip
        protocol = evaluation_protocol(self.spec(predict))  # configuration only: its phases
        self.executor.call(
            [Call.to(self.server, EvaluationHost.begin, round_idx, list(participants))]
            + [Call.to(c, EvaluationHost.submit, round_idx) for c in participants]
        )  # fmt: skip
        roles = {Role.SERVER: [self.server], Role.CLIENT: list(participants)}
        run_phases(protocol.round_phases, roles, calls, self.channel.transmit)
        (total,) = self.executor.call([Call.to(self.server, EvaluationHost.total)])
        return split_counts(total, self.num_classes)
