"""The recommendation path's parties (FeSoG, FedGNN), built from recipes so that either
executor (local or Ray) runs them.

* :class:`UserGroup` (``users-g``): user ``u`` lives in group ``u mod G``, as Flower's
  simulation engine hosts many virtual clients per process. A group holds its users'
  ratings, their trust links and, for FedGNN, their embeddings and expansion neighbours,
  and nothing of any other user. Its users' local programs run as one batched tensor program
  keyed by user (each user's gradient is its own); its private randomness (pseudo items, LDP
  noise) is its own stream, so results depend on ``user_groups``, not on the executor.
* :class:`RecServer` (``server``): the server-held tables and model, the choice of users,
  the aggregate of plain uploads and the SGD update.
* :class:`RecAggregator` (``aggregator``): the server's view under ``ideal`` / ``secagg`` /
  ``secagg+`` / ``ckks``. ``ideal`` is the ideal functionality of secure aggregation (a
  trusted party that passes on only the sums). For the real protocols the users' side is
  simulated here (one protocol client per user, :mod:`.aggregation`): the server's process
  only ever receives sums, but this process holds the cohort's uploads.
* :class:`ExpansionParty` (``third_party``): FedGNN's graph-expansion third party.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch

from protocols.dp.rng import make_rng, make_torch_generator
from protocols.wire import Payload
from securefgl.algorithms.recommendation import fedgnn, fesog
from securefgl.algorithms.recommendation.aggregation import (
    AggregateSums,
    TransportOptions,
    aggregate_uploads,
    plain_sums,
    server_update,
    sums_from_payload,
    sums_to_payload,
)
from securefgl.algorithms.recommendation.checkpoint import (
    Stateful,
    load_arrays,
    party_file,
    save_arrays,
    set_torch_rng_state,
    torch_rng_state,
)
from securefgl.algorithms.recommendation.expansion import (
    ExpansionResult,
    ThirdParty,
    expansion_result,
    item_tokens,
    merge_frames,
    split_reply,
    upload_frame,
)
from securefgl.algorithms.recommendation.ldp import apply_ldp
from securefgl.algorithms.recommendation.row_dp import RowDPConfig, bound_uploads
from securefgl.algorithms.recommendation.settings import RecConfig
from securefgl.algorithms.recommendation.uploads import from_payloads, to_payload
from securefgl.data.rating_views import ClientViews
from securefgl.data.ratings import RatingData
from securefgl.federation import SERVER, Party
from securefgl.federation.audit import AggregateAudit
from securefgl.federation.recipes import Recipe, party_builder, recipe

AGGREGATOR = "aggregator"
THIRD_PARTY = "third_party"
MODEL_TAG = "rec/model"
UPLOAD_TAG = "rec/upload"
SUMS_TAG = "rec/sums"


def group_id(g: int) -> str:
    return f"users-{int(g)}"


def group_of(users: np.ndarray, groups: int) -> np.ndarray:
    """The group that hosts each user: user u lives in group u mod ``groups``."""
    return np.asarray(users, np.int64) % groups


def group_members(g: int, n_users: int, groups: int) -> np.ndarray:
    """The users that group ``g`` hosts (:func:`group_of`)."""
    return np.flatnonzero(group_of(np.arange(n_users), groups) == g)


def _state_from(model: Payload) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.array(model.array(k))) for k in model.fields}


def _initial_state(cfg: RecConfig, n_users: int, n_items: int) -> dict[str, torch.Tensor]:
    """Every table and parameter drawn from the public seed (each party keeps its part)."""
    gen = torch.Generator().manual_seed(cfg.seed)
    if cfg.method == "fesog":
        return fesog.init_fesog(n_users, n_items, cfg.dim, gen)
    return fedgnn.init_fedgnn(n_users, n_items, cfg.dim, gen, cfg.item_std, cfg.arch)


class UserGroup(Stateful, Party):
    """A share of the users; see the module docstring."""


    def __init__(self, group: int, cfg: RecConfig, views: ClientViews, token_key: bytes) -> None:
        self.party_id = group_id(group)
        self.cfg, self.views, self.token_key = cfg, views, token_key
        self.private_rng = make_rng(cfg.noise_seed, "recommendation-private", self.party_id)
        self.noise_gen = make_torch_generator(cfg.noise_seed, "recommendation-noise", self.party_id)
        self.frame_order = make_rng(cfg.noise_seed, "expansion-frame-order", self.party_id)
        self.users = np.flatnonzero(views.train.lengths(np.arange(views.n_users)) > 0)
        self.user_emb: torch.Tensor | None = None
        self.expansion: ExpansionResult | None = None
        self._frame_positions = np.zeros(0, np.int64)
        self._tokens: np.ndarray | None = None  # its users' item tokens (same every expansion)
        if cfg.method == "fedgnn":  # each user's own embedding, from the public seed
            table = _initial_state(cfg, views.n_users, views.n_items)["local_user_emb"]
            mine = torch.zeros(views.n_users, dtype=torch.bool)
            members = group_members(group, views.n_users, cfg.user_groups)
            mine[torch.from_numpy(members)] = True
            self.user_emb = torch.where(mine.unsqueeze(1), table, torch.zeros_like(table))

    def _state(self, model: Payload) -> dict[str, torch.Tensor]:
        state = _state_from(model)
        if self.user_emb is not None:
            state["local_user_emb"] = self.user_emb
        return state

    def local_round(
        self, users: np.ndarray, model: Payload, update_local: bool = True
    ) -> tuple[Payload, np.ndarray | None, float]:
        """The sampled users' uploads after LDP, each user's ε of this release (None: no
        guarantee) and the sum of their training losses (diagnostics, not sent)."""
        cfg, users = self.cfg, np.asarray(users, np.int64)
        if not np.isin(users, self.users).all():
            raise ValueError(f"{self.party_id}: asked to train users it does not host")
        state = self._state(model)
        if cfg.method == "fesog":
            up = fesog.local_gradients(
                state,
                self.views,
                users,
                fesog.FeSoGConfig(cfg.dim, cfg.pseudo_items, cfg.uniform_averages,
                                  not cfg.own_user_rows),
                self.private_rng,
            )
        else:
            up, g_self = fedgnn.local_gradients(
                state,
                self.views,
                users,
                fedgnn.FedGNNConfig(
                    cfg.dim, cfg.pseudo_items, cfg.max_neighbors, cfg.offset, cfg.arch, cfg.loss
                ),
                self.expansion,
                self.private_rng,
                self.noise_gen,
            )
            if update_local and self.user_emb is not None:
                with torch.no_grad():  # each user updates its own embedding locally
                    U, idx = self.user_emb, torch.as_tensor(users)
                    U[idx] -= cfg.lr * g_self + cfg.weight_decay * U[idx]
        loss = float(up.loss.sum()) if up.loss is not None else 0.0
        up, eps = apply_ldp(up, cfg.ldp, self.noise_gen)
        if cfg.row_dp.on:
            up = bound_uploads(up, cfg.row_dp, self.private_rng)
        return to_payload(up), eps, loss

    def expansion_upload(self) -> Payload:
        """FedGNN: every user's tokens and embedding to the third party, one frame."""
        if self.user_emb is None:
            raise ValueError("graph expansion is FedGNN's")
        slot, pos = self.views.train.positions(self.users)
        emb = self.user_emb[torch.as_tensor(self.users)].numpy()
        if self._tokens is None:
            self._tokens = item_tokens(self.token_key, self.views.train.col[pos])
        frame, order = upload_frame(self.users, slot, self._tokens, emb, self.frame_order)
        self._frame_positions = pos[order]  # the frame's entries in its secret order
        return frame

    def expansion_reply(self, reply: Payload) -> None:
        self.expansion = expansion_result(reply, self._frame_positions, self.views.train.col.size)

    def save_state(self, directory: str) -> None:
        """Write this group's own state (:mod:`.checkpoint`): its users' embeddings, and its
        private generators if they are seeded (secret ones are never stored nor resumed).
        The expansion is not kept: a resumed run expands again."""
        arrays, meta = {}, {}
        if self.cfg.noise_seed is not None:
            arrays["noise_gen"] = torch_rng_state(self.noise_gen)
            meta["private_rng"] = self.private_rng.bit_generator.state
        if self.user_emb is not None:
            arrays["user_emb"] = self.user_emb.numpy()
        save_arrays(party_file(directory, self.party_id), arrays, meta)

    def load_state(self, directory: str) -> None:
        """Restore the users' embeddings; the private generators stay the fresh secret ones
        of this process (restoring them would replay the noise of every round redone after
        the checkpoint on different gradients), unless the noise is seeded (NOT PRIVATE)."""
        arrays, meta = load_arrays(party_file(directory, self.party_id))
        if self.cfg.noise_seed is not None:
            set_torch_rng_state(self.noise_gen, arrays["noise_gen"])
            self.private_rng.bit_generator.state = meta["private_rng"]
        if self.user_emb is not None:
            self.user_emb = torch.from_numpy(arrays["user_emb"])

    def predict(self, part: str, model: Payload) -> Payload:
        """Evaluation (not a protocol message): r̂, r and item of the users' ratings."""
        u, i, r = self.views.eval_pairs(part)
        state = self._state(model)
        if self.cfg.method == "fesog":
            pred = fesog.predict(state, self.views, u, i)
        else:
            pred = fedgnn.predict(state, self.views, u, i, self.expansion, self.cfg.offset)
        return Payload({"pred": pred.astype(np.float32), "rating": r, "item": i})


class RecServer(Stateful, Party):
    """The server: its tables (items; FeSoG's users too) and model, the users' sampling."""


    def __init__(self, cfg: RecConfig, n_users: int, n_items: int, active: np.ndarray) -> None:
        self.party_id, self.cfg = SERVER, cfg
        self.state = _initial_state(cfg, n_users, n_items)
        self.state.pop("local_user_emb", None)  # FedGNN's user embeddings are the clients'
        self.rng = np.random.default_rng([cfg.seed, 3])  # the server's choice of users
        self.active = np.asarray(active, np.int64)

    def sample(self) -> np.ndarray:
        k = min(self.cfg.users_per_round, self.active.size)
        return np.sort(self.rng.choice(self.active, size=k, replace=False))

    def table_sizes(self) -> tuple[int, int]:
        """(item rows, user rows) of the server's tables (public)."""
        user = self.state.get("user_emb")
        return self.state["item_emb"].shape[0], 0 if user is None else user.shape[0]

    def model(self) -> Payload:
        return Payload({k: v.numpy() for k, v in self.state.items()})

    def _update(self, sums: AggregateSums) -> None:
        server_update(
            self.state,
            sums,
            self.cfg.lr,
            self.cfg.weight_decay,
            "user_emb" if self.cfg.method == "fesog" else None,
        )

    def apply_uploads(self, uploads: list[Payload]) -> int:
        """``plain``: aggregate the users' uploads and step; returns the bytes the users
        uploaded (what the server received, for the run's accounting)."""
        up = from_payloads(uploads)
        self._update(plain_sums(up))
        return int(up.nbytes_per_user().sum())

    def apply_sums(self, sums: Payload) -> dict[str, float]:
        """Step on the aggregator's sums; returns their accounting (``bytes_up``, and
        ``support_bytes`` where the aggregation reports it)."""
        self._update(sums_from_payload(sums))
        return {k: float(v) for k, v in sums.meta.items() if k in ("bytes_up", "support_bytes")}

    def save_state(self, directory: str) -> None:
        """Write the server's tables and its sampling generator (:mod:`.checkpoint`)."""
        arrays = {k: v.numpy() for k, v in self.state.items()}
        save_arrays(party_file(directory, self.party_id), arrays, self.rng.bit_generator.state)

    def load_state(self, directory: str) -> None:
        arrays, rng_state = load_arrays(party_file(directory, self.party_id))
        if set(arrays) != set(self.state):
            raise ValueError(f"checkpoint tables {sorted(arrays)} are not {sorted(self.state)}")
        self.state = {k: torch.from_numpy(v) for k, v in arrays.items()}
        self.rng.bit_generator.state = rng_state


class RecAggregator(Party):
    """Sums of the cohort's uploads for a non-plain aggregation; see the module docstring."""


    def __init__(
        self, aggregation: str, n_items: int, n_users: int, options: TransportOptions,
        row_dp: RowDPConfig | None = None, noise_seed: int | None = None,
    ) -> None:  # fmt: skip
        self.party_id, self.aggregation = AGGREGATOR, aggregation
        self.n_items, self.n_users, self.options = n_items, n_users, options
        self.row_dp, self.noise_seed = row_dp, noise_seed
        self.audit = AggregateAudit()  # per round (the simulator's measurement)

    def aggregate(self, round_idx: int, uploads: list[Payload]) -> Payload:
        """The round's sums; under row DP with the members' noise shares (simulated here
        with the members' protocol clients), drawn from a fresh secret generator per round
        (seeded noise: one per round from the seed, so a resumed run redraws the same)."""
        up = from_payloads(uploads)
        dp = None
        if self.row_dp is not None:
            dp = (self.row_dp, make_rng(self.noise_seed, "row-dp", round_idx))
        sums, view = aggregate_uploads(
            up, self.aggregation, round_idx, self.n_items, self.n_users, self.options,
            errors=self.audit.errors, dp=dp,
        )  # fmt: skip
        return sums_to_payload(sums, bytes_up=view.bytes_up, **view.extra)

    def aggregate_error(self) -> float | None:
        """The largest abs error of any sum so far against the float64 sums of the users'
        inputs (the secure transport's quantisation; None: nothing measured)."""
        return self.audit.max_error()


class ExpansionParty(Stateful, Party):
    """FedGNN's third party: matches tokens across every group's frame."""


    def __init__(self, max_neighbors: int, noise_seed: int | None) -> None:
        self.party_id = THIRD_PARTY
        self.third_party = ThirdParty(max_neighbors, THIRD_PARTY)
        self.rng = make_rng(noise_seed, "recommendation-third-party")
        self.seeded = noise_seed is not None

    def match(self, frames: list[Payload]) -> list[Payload]:
        reply = self.third_party.match(merge_frames(frames), self.rng)
        return split_reply(reply, frames)

    def save_state(self, directory: str) -> None:
        state = self.rng.bit_generator.state if self.seeded else None
        save_arrays(party_file(directory, self.party_id), {}, state)

    def load_state(self, directory: str) -> None:
        """Seeded noise resumes its generator; secret noise keeps this process' fresh one."""
        if self.seeded:
            self.rng.bit_generator.state = load_arrays(party_file(directory, self.party_id))[1]


# ------------------------------------------------------------------ builders and recipes
@party_builder
def user_group(
    group: int, settings: str, shape: list, ratings: Payload, social: np.ndarray, token_key: bytes
) -> UserGroup:
    n_users, n_items, rating_min, rating_max = shape
    data = RatingData(
        "users",
        int(n_users),
        int(n_items),
        ratings.array("user"),
        ratings.array("item"),
        ratings.array("rating"),
        np.asarray(social, np.int64).reshape(2, -1),
        float(rating_min),
        float(rating_max),
    )
    views = ClientViews(data, ratings.array("part").astype(np.int8))
    return UserGroup(group, RecConfig.from_json(settings), views, token_key)


@party_builder
def rec_server(settings: str, n_users: int, n_items: int, active: np.ndarray) -> RecServer:
    return RecServer(RecConfig.from_json(settings), n_users, n_items, active)


@party_builder
def rec_aggregator(
    aggregation: str, n_items: int, n_users: int, options: TransportOptions,
    row_dp: dict | None = None, noise_seed: int | None = None,
) -> RecAggregator:  # fmt: skip
    dp = None if row_dp is None else RowDPConfig(**row_dp)
    return RecAggregator(aggregation, n_items, n_users, options, dp, noise_seed)


@party_builder
def expansion_party(max_neighbors: int, noise_seed: int | None) -> ExpansionParty:
    return ExpansionParty(max_neighbors, noise_seed)


def group_payload(views: ClientViews, members: np.ndarray) -> tuple[Payload, np.ndarray]:
    """The ratings (every split) and trust links of ``members`` only, as wire values."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("user", "item", "rating", "part")}
    for p, key in enumerate(("train", "val", "test")):
        slot, item, rating = views.split[key].gather(members)
        cols["user"].append(members[slot])
        cols["item"].append(item)
        cols["rating"].append(rating)
        cols["part"].append(np.full(slot.size, p, np.int64))
    slot, nbr, _ = views.social.gather(members)
    social = np.stack([members[slot], nbr]).astype(np.int64)
    return Payload({k: np.concatenate(v) for k, v in cols.items()}), social


def recipes(views: ClientViews, cfg: RecConfig, token_key: bytes) -> dict[str, Recipe]:
    """Every party of a run: the server, the user groups, the aggregator (non-plain
    aggregations) and FedGNN's third party."""
    settings = cfg.to_json()
    n_items, n_users = views.n_items, views.n_users
    out = {
        SERVER: recipe(
            rec_server,
            settings=settings,
            n_users=n_users,
            n_items=n_items,
            active=views.active_users(),
        )
    }
    shape = [n_users, n_items, views.rating_min, views.rating_max]
    for g in range(cfg.user_groups):
        ratings, social = group_payload(views, group_members(g, n_users, cfg.user_groups))
        out[group_id(g)] = recipe(
            user_group,
            group=g,
            settings=settings,
            shape=shape,
            ratings=ratings,
            social=social,
            token_key=token_key,
        )
    if cfg.aggregation != "plain":
        table_users = n_users if cfg.method == "fesog" else 0
        out[AGGREGATOR] = recipe(
            rec_aggregator,
            aggregation=cfg.aggregation,
            n_items=n_items,
            n_users=table_users,
            options=cfg.transport_options(),
            row_dp=asdict(cfg.row_dp) if cfg.row_dp.on else None,
            noise_seed=cfg.noise_seed,
        )
    if cfg.method == "fedgnn":
        out[THIRD_PARTY] = recipe(
            expansion_party, max_neighbors=cfg.max_neighbors, noise_seed=cfg.noise_seed
        )
    return out
