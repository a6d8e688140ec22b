"""Which attack targets which algorithm, and how the audit grid calls it.

``needs="run"``: the attack reads a trained :class:`~attacks.simulation.AuditRun`;
``needs="world"``: it attacks a pre-training protocol it runs itself on the seed's
client views (FedStruct's Ā construction, FedGCN's neighbour sums), in the secure-sum
mode the protocol stack maps to (``plain`` → plain, ``secagg``/``secagg+`` → masked,
``ckks`` → ckks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attacks.base import AttackResult, not_applicable
from attacks.deployment import FEDGLS_FAMILY
from attacks.dp_audit import dp_audit
from attacks.fedego_demix import fedego_demix
from attacks.fedgls_leakage import REPLAY, SUPPORT, learned_graph_replay, update_feature_support
from attacks.fedpub_embedding import NAME as FEDPUB_EMBEDDING
from attacks.fedpub_embedding import fedpub_embedding_inference
from attacks.fedsage_gradients import fedsage_gradient_features
from attacks.fedvn_domain import KEEP_TAGS as FEDVN_TAGS
from attacks.fedvn_domain import NAME as FEDVN_DOMAIN
from attacks.fedvn_domain import fedvn_domain_inference
from attacks.generated_features import generated_feature_inference
from attacks.gpfl_inference import label_distribution_inference, property_inference
from attacks.gradient_inversion import gradient_inversion
from attacks.h_inference import h_label_inference, h_link_inference, h_membership
from attacks.hop2vec_leakage import hop2vec_leakage
from attacks.link_stealing import link_stealing
from attacks.linkteller import linkteller
from attacks.membership import membership_inference
from attacks.neighbour_features import neighbour_features
from attacks.simulation import AuditRun, World
from attacks.structure_reconstruction import structure_reconstruction
from protocols.registry import parse_stack, secure_sum_for_stack
from securefgl.algorithms.fedgcn.settings import FedGCNSettings
from securefgl.algorithms.fedpub.parties import TAG_EMBEDDING
from securefgl.algorithms.fedstruct.settings import FedStructSettings
from securefgl.algorithms.spreadfgl.client import H_TAG
from securefgl.algorithms.spreadfgl.patch import PATCH_TAG


@dataclass(frozen=True)
class Cell:
    """What one grid cell hands an attack."""

    run: AuditRun
    world: World  # the seed's UNPERTURBED views (same streams as the run)
    stack: tuple[str, ...]
    edge_dp: tuple[str, float] | None

    @property
    def sum_mode(self) -> str:
        return secure_sum_for_stack(self.stack)

    @property
    def mechanism(self) -> str | None:
        return parse_stack(self.stack)[1]


@dataclass(frozen=True)
class AttackSpec:
    name: str
    targets: tuple[str, ...]
    call: Callable[[Cell], AttackResult]
    metric: str = "auc"  # the headline metric (named on "not applicable" rows)
    keep_tags: tuple[str, ...] = ()  # message tags whose payloads it needs in every round
    tasks: tuple[str, ...] = ("node",)  # the tasks whose runs it reads


def _dp_audit(cell: Cell) -> AttackResult:
    cfg = cell.run.config
    if cell.mechanism != "clip_noise":
        reason = "no client-level DP mechanism (clip_noise) in the stack: nothing to audit"
        return not_applicable("dp_audit", "server", reason)
    privacy = cell.run.result.privacy  # the run's own claim, against its own adversary
    return dp_audit(
        cfg.protocol.dp_clip,
        cfg.protocol.dp_noise,
        int(privacy.get("dp_rounds", cfg.rounds)),  # the aggregations the ledger charged
        cfg.protocol.dp_delta,
        claimed_epsilon=privacy.get("epsilon"),
        mode=str(cfg.protocol.clip_noise_mode),
        sample_rate=cfg.client_fraction,
        sampling=cfg.client_sampling,
        knows_participation=privacy.get("adversary") == "server",
        colluding=cfg.protocol.dp_colluding_clients,
        accountant=cfg.protocol.dp_accountant,
        seed=cell.run.result.seed,
    )


#: the algorithms that upload H and receive generated neighbour features
SPREADFGL = ("spreadfgl", "fedgl")

#: algorithms whose released model the model holder queries (:mod:`attacks.deployment`)
RELEASED_MODEL = ("central", "fedavg", "fedprox", "fedstruct", *FEDGLS_FAMILY)

def _structure_reconstruction(c: Any) -> AttackResult:
    """Algorithm 3's hop-2 exchange as the run made it: its sum mode and min_senders (not
    applicable when the run exchanged no hop-2 blocks)."""
    s = FedStructSettings.of(c.run.config)
    if s.abar == "oracle" or int(s.structure_hops or 1) < 2:
        why = ("the simulator built Ā (abar = 'oracle'): no block was exchanged"
               if s.abar == "oracle" else f"structure_hops = {s.structure_hops}: no hop-2 "
               "exchange")  # fmt: skip
        return not_applicable("structure_reconstruction", "client i (each in turn)", why)
    return structure_reconstruction(c.world, str(s.sum_mode), c.edge_dp, c.run.result.seed,
                                    min_senders=s.abar_min_senders)  # fmt: skip


def _neighbour_features(c: Any) -> AttackResult:
    """FedGCN's hop-1 sums as the run made them: its sum mode and normalisation."""
    config = c.run.config
    s = config.section(FedGCNSettings)
    mode = s.sum_mode or config.protocol.secure_sum_mode()
    return neighbour_features(c.run.world, mode, norm=s.norm)


ATTACKS: dict[str, AttackSpec] = {
    spec.name: spec
    for spec in (
        AttackSpec("link_stealing", RELEASED_MODEL, lambda c: link_stealing(c.run)),
        AttackSpec("linkteller", RELEASED_MODEL, lambda c: linkteller(c.run)),
        AttackSpec("membership_inference", RELEASED_MODEL, lambda c: membership_inference(c.run)),
        AttackSpec(
            "gradient_inversion",
            ("fedavg", "fedprox"),
            lambda c: gradient_inversion(c.run),
            "support_auc",
        ),
        AttackSpec("hop2vec_leakage", ("fedstruct",), lambda c: hop2vec_leakage(c.run)),
        AttackSpec("structure_reconstruction", ("fedstruct",), _structure_reconstruction),
        AttackSpec(
            "neighbour_feature_inference", ("fedgcn",), _neighbour_features, "cosine"
        ),
        AttackSpec(
            SUPPORT, ("fedgls",), lambda c: update_feature_support(c.run), "support_auc_phi"
        ),
        AttackSpec(
            REPLAY,
            ("fedgls",),
            lambda c: learned_graph_replay(c.run),
            "learned_f1",
            keep_tags=("fedgls/model",),
        ),
        AttackSpec("dp_audit", ("fedavg", "fedprox", "fedgls"), _dp_audit, "epsilon_lower_bound",
                   tasks=("node", "graph")),  # fmt: skip
        AttackSpec(
            "property_inference",
            ("gpfl",),
            lambda c: property_inference(c.run),
            "pearson",
            ("gpfl/properties",),
            ("graph",),
        ),
        AttackSpec(
            "label_distribution_inference",
            ("gpfl",),
            lambda c: label_distribution_inference(c.run),
            "abs_spearman",
            ("gpfl/features", "gram/matrices"),
            ("graph",),
        ),
        AttackSpec("h_link_inference", SPREADFGL, lambda c: h_link_inference(c.run),
                   keep_tags=(H_TAG,)),  # fmt: skip
        AttackSpec("h_label_inference", SPREADFGL, lambda c: h_label_inference(c.run),
                   "accuracy", (H_TAG,)),  # fmt: skip
        AttackSpec("h_membership", SPREADFGL, lambda c: h_membership(c.run), keep_tags=(H_TAG,)),
        AttackSpec("generated_feature_inference", SPREADFGL,
                   lambda c: generated_feature_inference(c.run), "label_accuracy",
                   (PATCH_TAG,)),  # fmt: skip
        AttackSpec("fedsage_gradient_features", ("fedsage+",),
                   lambda c: fedsage_gradient_features(c.run), "cosine"),  # fmt: skip
        AttackSpec(FEDPUB_EMBEDDING, ("fed-pub",), lambda c: fedpub_embedding_inference(c.run),
                   "community_auc", (TAG_EMBEDDING,)),  # fmt: skip
        AttackSpec("fedego_demix", ("fedego",), lambda c: fedego_demix(c.run),
                   "label_accuracy", ("fedego/mixed-ego-graphs",)),  # fmt: skip
        AttackSpec(FEDVN_DOMAIN, ("fedvn",), lambda c: fedvn_domain_inference(c.run),
                   "domain_accuracy", FEDVN_TAGS, ("graph",)),  # fmt: skip
    )
}


def attacks_for(
    algorithm: str, names: list[str] | None = None, task: str | None = None
) -> list[AttackSpec]:
    """The requested attacks (default: all) that target ``algorithm`` (on ``task``'s runs:
    ``fedavg`` names a node and a graph algorithm; None: any task)."""
    chosen = names if names else list(ATTACKS)
    unknown = [n for n in chosen if n not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {unknown}; choose from {sorted(ATTACKS)}")
    return [ATTACKS[n] for n in chosen if algorithm in ATTACKS[n].targets
            and (task is None or task in ATTACKS[n].tasks)]  # fmt: skip


def describe() -> list[dict[str, Any]]:
    return [{"attack": s.name, "targets": list(s.targets)} for s in ATTACKS.values()]
