"""The round runner: data → split → partition → client views → algorithm → rounds → result.

Per round it records the training loss, wall time and the bytes that crossed the channel
(up to the server, down from it, client-to-client); on the evaluation schedule (every
``eval_every`` rounds and the last) it adds accuracy and macro-F1 on the validation and
test nodes. The run's bytes are also broken down by message family (set-up, structure,
rounds, evaluation: :mod:`securefgl.federation.transcript`). The reported result is the
last round's model (FedStruct's protocol, no model selection).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from protocols.base import ProtocolError
from protocols.dp.rng import VOID, noise_label
from protocols.identity import HONEST_BUT_CURIOUS
from securefgl.algorithms.base import Algorithm
from securefgl.algorithms.registry import algorithm_class, check_config, cross_edge_mode
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.data import (
    ClientGraph,
    Partition,
    build_client_views,
    client_split,
    load_dataset,
    partition_graph,
    random_split,
)
from securefgl.data.catalog import names_csbm
from securefgl.data.metis import largest_component
from securefgl.data.synthetic import csbm
from securefgl.experiment.graph_world import (
    best_of_last,
    client_mean_from_counts,
    draw_graph_world,
    generator_options,
    load_graph_data,
    selected_by_validation,
)
from securefgl.experiment.metrics import pooled_from_counts
from securefgl.federation import Channel, Transcript
from securefgl.federation.evaluation import SecureEvaluation, SplitCounts, pooled_counts
from securefgl.federation.federation import Federation
from securefgl.federation.party import Target, client_party_id
from securefgl.federation.progress import Progress
from securefgl.federation.stack import ProtocolStack, build_stack
from securefgl.federation.subnormals import subnormals_flushed
from securefgl.federation.transcript import EVALUATION, ROUNDS, SETUP

log = logging.getLogger(__name__)

#: Without a progress bar, a run writes a progress line this often (seconds; progress
#: lines: :mod:`securefgl.federation.progress`).
PROGRESS_LOG_SECONDS = 60.0


@dataclass
class SimulationState:
    """The simulator's side of one run, kept for attacks and audits (``keep_state``).

    ``graph`` (with the split masks) and ``assignment`` are GROUND TRUTH: an attack may use
    them only to score itself, never as input. ``views`` are the clients' own data (after
    ``views_hook``) and ``algorithm`` holds every party's final state.
    """

    graph: Data
    assignment: np.ndarray
    views: list[ClientGraph]
    algorithm: Algorithm
    view_seed: int  # seed of the opaque-id permutation (``opaque_id_permutation``)


@dataclass
class RunResult:
    """One algorithm × seed. Accuracy and macro-F1 are fractions in [0, 1] (as everywhere in
    result.json; the printed tables show %)."""

    algorithm: str
    seed: int
    federated: bool
    final: dict[str, float]
    history: list[dict[str, Any]]
    partition: dict[str, Any]
    setup_bytes: int
    privacy: dict[str, Any] = field(default_factory=dict)  # ε, δ from the accountant (DP only)
    transcript: Transcript | None = field(default=None, repr=False)
    state: SimulationState | None = field(default=None, repr=False)
    setup_seconds: float = 0.0  # algo.setup: e.g. FedStruct's Ā build, FedGCN's sums
    protection: dict[str, str] = field(default_factory=dict)  # per message family, as applied
    model: str = ""  # the model as it is (e.g. "MLP on ÂᴸX" for FedGCN)
    model_short: str = ""  # its short name for the printed table ("MLP")
    setting: str = "federated"  # or "local" / "central" (securefgl.algorithms.base.SETTINGS)
    local_work: str = ""  # what a client trains per round ("1 local epoch")
    bytes_by_family: dict[str, int] = field(default_factory=dict)  # setup, structure, ...
    aggregate_error: float | None = None  # max |aggregate - float64 mean| (Algorithm)

    @property
    def bytes(self) -> int:
        """Every byte the channel carried in the run (the sum of :attr:`bytes_by_family`;
        the set-up's, the rounds' and evaluation's messages)."""
        if self.bytes_by_family:
            return sum(self.bytes_by_family.values())
        return self.setup_bytes + sum(
            h["bytes_up"] + h["bytes_down"] + h["bytes_p2p"] for h in self.history
        )

    @property
    def refused_evaluations(self) -> list[int]:
        """The rounds whose secure evaluation could not run (no metrics there)."""
        return [h["round"] for h in self.history if "evaluation_refused" in h]

    @property
    def silent(self) -> dict[str, int]:
        """Each party that went silent and the round it was found so (the later rounds'
        metrics cover the others)."""
        return {p: h["round"] for h in self.history for p in h.get("went_silent", ())}

    @property
    def seconds(self) -> float:
        """Wall time of set-up plus every round (``setup_bytes`` are counted likewise)."""
        return self.setup_seconds + sum(h["seconds"] for h in self.history)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "seed": self.seed,
            "federated": self.federated,
            "setting": self.setting,
            "final": self.final,
            "setup_bytes": self.setup_bytes,
            "bytes": self.bytes,
            "bytes_by_family": self.bytes_by_family,
            "aggregate_max_abs_error": self.aggregate_error,
            "setup_seconds": self.setup_seconds,
            "history": self.history,
            "partition": self.partition,
            "privacy": self.privacy,
            "protection": self.protection,
            "model": self.model,
            "model_short": self.model_short,
            "local_work": self.local_work,
            "silent": self.silent,
        }


@dataclass
class ExperimentResult:
    """Every run of an experiment (:func:`run_experiment`), with its configuration."""

    config: ExperimentConfig
    runs: list[RunResult]

    def summary(self) -> list[dict[str, Any]]:
        """Per algorithm: the mean and std over seeds of its final metrics (fractions), its
        bytes and seconds, and every privacy guarantee it claims (``guarantees``, ε the mean
        over seeds; ``epsilon``: the first one's)."""
        rows = []
        for algo in dict.fromkeys(r.algorithm for r in self.runs):
            runs = [r for r in self.runs if r.algorithm == algo]
            row: dict[str, Any] = {
                "algorithm": algo,
                "federated": runs[0].federated,
                "setting": runs[0].setting,
                "seeds": len(runs),
            }
            for key in ("test_acc", "test_f1", "val_acc", "best_last_test_acc",
                        "val_selected_test_acc"):  # fmt: skip
                values = np.array([r.final[key] for r in runs if key in r.final])
                if not values.size:  # graph tasks: no validation split
                    continue
                row[key] = float(values.mean())
                row[f"{key}_std"] = float(values.std())
                if values.size < len(runs):  # a seed whose last evaluation could not run
                    row[f"{key}_seeds"] = int(values.size)
            row["bytes"] = float(np.mean([r.bytes for r in runs]))
            families = dict.fromkeys(k for r in runs for k in r.bytes_by_family)
            row["bytes_by_family"] = {
                k: float(np.mean([r.bytes_by_family.get(k, 0) for r in runs])) for k in families
            }
            errors = [r.aggregate_error for r in runs]
            row["aggregate_max_abs_error"] = None if None in errors else max(errors)
            row["guarantees"] = _mean_guarantees([r.privacy.get("guarantees", []) for r in runs])
            first = row["guarantees"][0] if row["guarantees"] else {}
            row["epsilon"] = first.get("epsilon")
            row["delta"] = first.get("delta")
            row["adversary"] = first.get("adversary")
            row["noise"] = runs[0].privacy.get("noise", noise_label(False, False))
            row["model"] = runs[0].model
            row["model_short"] = runs[0].model_short
            row["local_work"] = runs[0].local_work
            row["seconds"] = float(np.mean([r.seconds for r in runs]))
            row["setup_seconds"] = float(np.mean([r.setup_seconds for r in runs]))
            rows.append(row)
        return rows


def _mean_guarantees(per_run: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The guarantees of the first run with each ε the mean over the runs (None if a run
    lacks it)."""
    out = []
    for i, claim in enumerate(per_run[0]):
        eps = [g[i].get("epsilon") if i < len(g) else None for g in per_run]
        mean = None if None in eps else float(np.mean(eps))
        out.append({**{k: v for k, v in claim.items() if k != "epsilon"}, "epsilon": mean})
    return out


def _is_csbm(config: ExperimentConfig) -> bool:
    """Whether the node task's dataset names the CSBM generator (any alias, e.g. ``c-sbm``)."""
    return config.task == "node" and names_csbm(config.dataset)


def data_identity(config: ExperimentConfig) -> tuple[Any, ...]:
    """What :func:`load_graph` reads from ``config``: configs with equal identities load the
    same data, so a caller may load it once for all of them (and must not across others)."""
    source: Any = config.csbm if _is_csbm(config) else None
    if config.task == "graph":
        source = generator_options(config)
    return (
        config.task, config.dataset.lower(), config.data_root, config.download,
        repr(source), config.normalize_features, config.largest_component,
    )  # fmt: skip


def load_graph(config: ExperimentConfig) -> Any:
    """The run's data: a ``Data`` graph (node task) or a ``GraphDataset`` (graph task)."""
    if config.task == "graph":
        return load_graph_data(config)
    if _is_csbm(config):
        data = csbm(**config.csbm)
    else:
        data = load_dataset(config.dataset, config.data_root, download=config.download)
    if config.largest_component:
        data = largest_component(data)
    if config.normalize_features:
        if bool((data.x < 0).any()):
            raise ConfigError("normalize_features needs non-negative features (e.g. word counts)")
        data = data.clone()
        data.x = data.x / data.x.sum(dim=1, keepdim=True).clamp(min=1.0)  # as PyG
    return data


def derive_seeds(seed: int, count: int) -> list[int]:
    """``count`` independent 32-bit seeds from ``seed`` (numpy SeedSequence)."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(count)]


def draw_world(
    config: ExperimentConfig, seed: int, data: Data
) -> tuple[Data, Partition, list[ClientGraph], int]:
    """The split (on a copy of ``data``), partition, client views and view seed of ``seed``.

    Independent streams: the same seed must not give the split and the partition the same
    permutation (which would put every training node on one client).
    """
    split_seed, part_seed, view_seed = derive_seeds(seed, 3)
    graph = data.clone()
    graph.train_mask, graph.val_mask, graph.test_mask = random_split(
        graph.num_nodes, *config.split, seed=split_seed
    )
    try:
        part = partition_graph(
            graph, config.clients, config.partition, seed=part_seed, cut=config.partition_cut
        )
    except ValueError as err:  # the configuration does not fit the data (clients, cut)
        raise ConfigError(f"partition {config.partition} of {config.dataset}: {err}") from None
    if config.split_scope == "client":  # the fractions inside each client (FedSage+, FedGLS)
        graph.train_mask, graph.val_mask, graph.test_mask = client_split(
            part.assignment, *config.split, seed=split_seed
        )
    views = build_client_views(graph, part.assignment, cross_edge_mode(config), seed=view_seed)
    idle = sum(not bool(v.train_mask.any()) for v in views)
    if idle:  # they train nothing (weight ~0) but still take part and are evaluated
        log.warning("%d of %d clients hold no training node (%s, %s partition): they train "
                    "nothing", idle, len(views), config.dataset, config.partition)  # fmt: skip
    return graph, part, views, view_seed


@subnormals_flushed()  # fast late rounds (securefgl.federation.subnormals)
def run_single(
    config: ExperimentConfig,
    algorithm: str,
    seed: int,
    data: Data,
    progress: bool = True,
    keep_state: bool = False,
    views_hook: Callable[[list[ClientGraph]], list[ClientGraph]] | None = None,
    transcript: Transcript | None = None,
) -> RunResult:
    """Train ``algorithm`` once with ``seed`` (which also draws the split and partition).

    ``keep_state`` attaches a :class:`SimulationState` (attacks); ``views_hook`` maps the
    client views before the algorithm sees them (e.g. each client perturbing its own edges);
    ``transcript`` replaces the one built from ``config.store_payloads``.
    """
    cls = algorithm_class(algorithm, config.task)
    cls.check_stack(config)  # what the method cannot honour, before any work
    graph_task = config.task == "graph"
    size, unit = (data.num_graphs, "graphs") if graph_task else (data.num_nodes, "nodes")
    if config.clients > size:
        raise ConfigError(f"clients={config.clients} exceeds the {size} {unit} of {config.dataset}")
    torch.manual_seed(seed)
    np.random.seed(seed)
    world = draw_graph_world if graph_task else draw_world
    graph, part, views, view_seed = world(config, seed, data)  # type: ignore[operator]
    metrics = client_mean_from_counts if graph_task else pooled_from_counts
    last = config.graph.best_of_last if graph_task else 0  # evaluated every round
    if views_hook is not None:
        views = views_hook(views)
    if transcript is None:
        transcript = Transcript(store_payloads=config.store_payloads)
    channel = Channel(transcript)
    per_round = config.clients_per_round
    noise_seed = seed if config.protocol.seeded_noise else None  # privacy noise: secret by default
    experiment_id = f"{config.name or 'run'}|seed={seed}"
    stack = build_stack(config, per_round, experiment_id=experiment_id, seed=noise_seed)
    algo = cls(config)
    t_setup = time.perf_counter()
    federation = Federation(views, channel, stack, seed, progress, noise_seed, config.executor)
    if config.executor == "ray":
        if keep_state:
            raise ConfigError("attacks read the parties' state: run them on the local executor")
        federation.executor_options = {
            "workers": config.workers, "address": config.ray_address,
            "party_timeout": config.party_timeout, "threads": config.threads,
            "co_host": config.ray_co_host,
        }  # fmt: skip
    label = f"{algorithm} seed={seed}"
    with closing(federation), Progress(label, config.rounds, progress, PROGRESS_LOG_SECONDS) as bar:
        with channel.transcript.family_scope(SETUP):  # the algorithm marks its structure
            algo.setup(federation, graph if algo.needs_global_graph else None)
        setup_seconds = time.perf_counter() - t_setup
        if setup_seconds >= PROGRESS_LOG_SECONDS:
            log.info("%s: set-up took %.0f s", label, setup_seconds)
        bar.start_rounds()
        transcript = channel.transcript
        setup_bytes = transcript.total_bytes()
        evaluate = evaluation(config, algo, federation, int(graph.num_classes))
        history = train_rounds(config, algo, stack, transcript, evaluate, label, bar, metrics, last)
        final = {k: v for k, v in history[-1].items() if k.endswith(("_acc", "_f1"))}
        if graph_task:
            final.update(best_of_last(history, last))
            final.update(selected_by_validation(history))
        log.info("%s: test acc %.4f", label, final.get("test_acc", float("nan")))
        return RunResult(
            algorithm,
            seed,
            algo.federated,
            final,
            history,
            part.report(graph).to_dict(),
            setup_bytes,
            _privacy(stack.privacy(), algo.privacy(), config.protocol.seeded_noise),
            transcript if transcript.store_payloads else None,
            SimulationState(graph, np.asarray(part.assignment), views, algo, view_seed)
            if keep_state
            else None,
            setup_seconds,
            protection(config, algo),
            algo.model_label(),
            algo.model_short(),
            algo.setting,
            algo.local_work(),
            transcript.bytes_by_family(),
            algo.aggregate_error(),
        )


Evaluate = Callable[[int], dict[str, SplitCounts]]


def evaluation(
    config: ExperimentConfig, algo: Algorithm, federation: Federation, num_classes: int
) -> Evaluate:
    """How a set-up ``algo`` is evaluated after a round: each client's reply summed by the
    driver, or with ``secure_evaluation`` (a federated method) a SecAgg sum in the run's
    threat model that the server opens (:mod:`securefgl.federation.evaluation`)."""
    found = algo.evaluators() if algo.federated else None
    if not config.secure_evaluation or found is None:
        return lambda _round: pooled_counts(algo.predict(), num_classes)
    stack = federation.stack
    secure = SecureEvaluation(
        algo.executor, federation.channel, found.server, stack.experiment_id,
        num_classes, stack.threat_model, stack.sum_options().get("registry"),
    )  # fmt: skip
    target = Target.of(found.predict)
    everyone = sorted(client_party_id(v.client_id) for v in federation.views)

    def secure_counts(round_idx: int) -> dict[str, SplitCounts]:
        now = algo.evaluators()
        gone = algo.silent_parties()
        clients = [c for c in (now.clients if now else []) if c not in gone]
        if stack.threat_model != HONEST_BUT_CURIOUS and sorted(clients) != everyone:
            missing = ", ".join(sorted(set(everyone) - set(clients)))
            raise ProtocolError(f"{missing} silent: against a malicious server every "
                                "evaluation sums every client")  # fmt: skip
        return secure.counts(round_idx, target, clients)

    return secure_counts


#: the protection entry of the evaluation replies (:func:`protection`)
EVALUATION_REPLIES = "evaluation replies (clients -> server)"


def protection(config: ExperimentConfig, algo: Algorithm) -> dict[str, str]:
    """How each family of ``algo``'s messages travelled (:meth:`Algorithm.protection`),
    its evaluation replies included."""
    if not algo.federated:
        return algo.protection()
    how = (
        "secagg sum of the clients' confusion counts and own metrics (the server learns the "
        "totals)" if config.secure_evaluation
        else "plain: each client's sorted (label, prediction) pairs, i.e. its confusion counts"
    )  # fmt: skip
    return {**algo.protection(), EVALUATION_REPLIES: how}


def train_rounds(
    config: ExperimentConfig,
    algo: Algorithm,
    stack: ProtocolStack,
    transcript: Transcript,
    evaluate: Evaluate,
    label: str,
    bar: Progress | None = None,
    metrics: Callable[[dict[str, SplitCounts]], dict[str, float]] = pooled_from_counts,
    last: int = 0,
) -> list[dict[str, Any]]:
    """The rounds of a set-up ``algo``: per round its loss, wall time and bytes, plus the
    metrics of ``evaluate`` (:func:`evaluation`) on the evaluation schedule (every
    ``eval_every`` rounds and the last ``last``, at least one); one row per round, each
    reported to ``bar``. The deployment driver (``securefgl.deploy``) runs the same loop, so
    both give the same history for the same parties."""
    history: list[dict[str, Any]] = []
    silent: set[str] = set()
    for r in range(config.rounds):
        start, t0 = len(transcript.entries), time.perf_counter()
        with transcript.family_scope(ROUNDS):
            loss = algo.train_round(r)
        row: dict[str, Any] = {"round": r, "loss": loss, "seconds": time.perf_counter() - t0}
        if gone := sorted(algo.silent_parties() - silent):
            row["went_silent"] = gone
            silent.update(gone)
        row.update(
            {
                f"bytes_{k}": v
                for k, v in transcript.bytes_by_direction(algo.server_ids, since=start).items()
            }
        )
        if (r + 1) % config.eval_every == 0 or r >= config.rounds - max(last, 1):
            try:
                with transcript.family_scope(EVALUATION):
                    counts = evaluate(r)
            except ProtocolError as err:
                if not config.secure_evaluation:
                    raise
                log.warning("%s round %d: the secure evaluation could not run (%s): no "
                            "metrics this round", label, r, err)  # fmt: skip
                row["evaluation_refused"] = str(err)
            else:
                row.update(metrics(counts))
            if "epsilon" in (spent := stack.privacy()):
                row["epsilon"] = spent["epsilon"]
            log.debug("%s round=%d %s", label, r, row)
        history.append(row)
        if bar is not None:
            bar.step(loss=loss, test_acc=row.get("test_acc"))
    return history


def _privacy(stack: dict[str, Any], algorithm: dict[str, Any], seeded: bool) -> dict[str, Any]:
    """The run's privacy claims: every ε under ``guarantees`` (the stack's, then the
    algorithm's own, e.g. FedStruct's edge DP), and ``noise`` (secret, seeded: every claim
    void, or none)."""
    out = {**stack, **algorithm}
    claims = [*stack.get("guarantees", []), *algorithm.get("guarantees", [])]
    if seeded:  # each claim says so itself, for whoever reads one claim alone
        claims = [{**g, "void": VOID} for g in claims]
        if "epsilon" in out:  # and so does the headline ε
            out["void"] = VOID
    if claims:
        out["guarantees"] = claims
    out["noise"] = noise_label(seeded, bool(claims))
    return out


def run_experiment(
    config: ExperimentConfig,
    progress: bool = True,
    *,
    keep_state: bool = False,
    keep_tags: Iterable[str] = (),
) -> ExperimentResult:
    """Every configured algorithm × seed on the same data.

    ``keep_state``: keep what an attack needs (``attacks.run(result, name)``): each run's
    simulator state (the parties' final models, the client views, the ground truth) and its
    transcript with the payloads of the set-up and round 0, plus every round's payloads of
    ``keep_tags`` (``attacks.keep_tags(names)``). Memory grows with the graph and the model."""
    check_config(config)
    torch.set_num_threads(config.threads)
    data = load_graph(config)

    def transcript() -> Transcript | None:
        if not keep_state:
            return None
        return Transcript(store_payloads=True, payload_rounds=0, keep_tags=frozenset(keep_tags))

    runs = [
        run_single(config, algo, seed, data, progress, keep_state=keep_state,
                   transcript=transcript())  # fmt: skip
        for seed in config.seeds
        for algo in config.algorithms
    ]
    return ExperimentResult(config, runs)
