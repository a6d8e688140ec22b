"""``DPAggregation``: a DP mechanism layered over any aggregation protocol.

A stack such as ``["clip_noise", "secagg"]`` becomes ``DPAggregation(SecAggregation(...),
ClipNoiseMechanism(mode="distributed", ...))``. The inner protocol's phases, messages and
threat model are untouched: each client transforms its update in ``begin_round`` (clip,
noise share or LDP) before the inner client sees it, and the output holder's ``result()``
passes once per round through the mechanism's ``server_apply`` (central noise, fixed
denominator) and is cached. Other phase methods are delegated to the inner party.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from protocols.base import (
    AggregateResult,
    AggregationClient,
    AggregationParties,
    AggregationProtocol,
    AggregationServer,
    Role,
)
from protocols.dp.accounting import Accountant, AccountantKind
from protocols.dp.rng import make_rng


@runtime_checkable
class UpdateMechanism(Protocol):
    """A per-round transform of client updates and of the aggregate."""

    name: str

    @property
    def requires_server_output(self) -> bool: ...

    def client_apply(
        self, vector: np.ndarray, weight: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, float]: ...

    def server_apply(
        self, result: AggregateResult, rng: np.random.Generator
    ) -> AggregateResult: ...

    def new_accountant(self, kind: AccountantKind, delta: float) -> Accountant:
        """The ledger this mechanism charges (Opacus RDP/PRV for Gaussian noise, pure-DP
        composition for Laplace)."""
        ...

    def account_round(
        self,
        accountant: Accountant,
        *,
        sample_rate: float,
        survivors: int,
        dim: int,
        colluding: int = 0,
    ) -> None:
        """Charge one aggregation round (``survivors`` clients, ``dim``-long updates) at
        sampling rate ``sample_rate``, with ``colluding`` clients' noise known to the
        adversary (distributed noise)."""
        ...


class _Delegating:
    """Forward unknown attributes (the inner protocol's phase methods) to ``_inner``."""

    _inner: Any

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_mechanism", "_rng"):
            raise AttributeError(name)
        return getattr(self._inner, name)


class _ResultCache:
    """Apply ``server_apply`` once per inner result object."""

    def __init__(self) -> None:
        self.inner: AggregateResult | None = None
        self.outer: AggregateResult | None = None

    def get(
        self, inner: AggregateResult | None, mechanism: UpdateMechanism, rng: np.random.Generator
    ) -> AggregateResult | None:
        if inner is None:
            return None
        if inner is not self.inner:
            self.inner, self.outer = inner, mechanism.server_apply(inner, rng)
        return self.outer

    def clear(self) -> None:
        self.inner = self.outer = None


class DPClient(_Delegating, AggregationClient):
    """Client wrapper: perturbs the update, then hands it to the inner client."""

    def __init__(
        self, inner: AggregationClient, mechanism: UpdateMechanism, rng: np.random.Generator
    ) -> None:
        AggregationClient.__init__(self, inner.party_id)
        self._inner = inner
        self._mechanism = mechanism
        self._rng = rng
        self._cache = _ResultCache()

    @property
    def inner(self) -> AggregationClient:
        return self._inner

    def begin_round(self, round_idx: int, vector: np.ndarray, weight: float) -> None:
        self._cache.clear()
        v, w = self._mechanism.client_apply(np.asarray(vector, np.float64), weight, self._rng)
        self._inner.begin_round(round_idx, v, w)

    def result(self) -> AggregateResult | None:
        return self._cache.get(self._inner.result(), self._mechanism, self._rng)


class DPServer(_Delegating, AggregationServer):
    """Server wrapper: post-processes (central mode: noises) the inner aggregate."""

    def __init__(
        self, inner: AggregationServer, mechanism: UpdateMechanism, rng: np.random.Generator
    ) -> None:
        AggregationServer.__init__(self, inner.party_id)
        self._inner = inner
        self._mechanism = mechanism
        self._rng = rng
        self._cache = _ResultCache()

    @property
    def inner(self) -> AggregationServer:
        return self._inner

    def begin_round(self, round_idx: int, participants: Sequence[str]) -> None:
        self._cache.clear()
        self._inner.begin_round(round_idx, participants)

    def result(self) -> AggregateResult | None:
        return self._cache.get(self._inner.result(), self._mechanism, self._rng)

    def empty_round_result(self, dim: int) -> AggregateResult | None:
        """A round nobody took part in: a mechanism that noises at the output holder still
        releases (noise around a zero sum), so that an empty sample is not visible in the
        output (Poisson-sampled DP-SGD does the same). ``None`` for other mechanisms."""
        if not self._mechanism.requires_server_output:
            return None
        return self._mechanism.server_apply(AggregateResult(np.zeros(dim), 0.0, ()), self._rng)


class DPAggregation(AggregationProtocol):
    """``inner`` aggregation with ``mechanism`` applied to its inputs and output.

    Threat model: the inner protocol's (what each party sees of the others' messages) plus
    the mechanism's DP guarantee on what the output holder obtains — see the mechanism's
    docstring for who is protected from whom. ``seed`` makes the noise reproducible (tests);
    ``None`` seeds every party's generator from ``secrets``.
    """

    def __init__(
        self, inner: AggregationProtocol, mechanism: UpdateMechanism, seed: int | None = None
    ) -> None:
        if mechanism.requires_server_output and inner.output_role is not Role.SERVER:
            raise ValueError(
                f"{mechanism.name} adds noise at the output holder, but {inner.name!r} "
                f"delivers the aggregate to {inner.output_role.value}s; use distributed noise"
            )
        self.inner = inner
        self.mechanism = mechanism
        self.seed = seed
        # per-instance values of the base class' class-level protocol description
        self.name = f"{mechanism.name}+{inner.name}"  # type: ignore[misc]
        self.output_role = inner.output_role  # type: ignore[misc]
        self.setup_phases = inner.setup_phases  # type: ignore[misc]
        self.round_phases = inner.round_phases  # type: ignore[misc]
        # distributed noise: a dropped client's share is missing, so the accounted σ fails
        distributed = getattr(mechanism, "mode", None) == "distributed"
        self.tolerates_dropouts = inner.tolerates_dropouts and not distributed  # type: ignore[misc]

    def min_summands(self, n_clients: int) -> int | None:
        return self.inner.min_summands(n_clients)

    def min_participants(self, n_clients: int) -> int:
        return self.inner.min_participants(n_clients)

    def create_parties(
        self, server_id: str, client_ids: Sequence[str], dim: int
    ) -> AggregationParties:
        parties = self.inner.create_parties(server_id, client_ids, dim)

        def rng(party_id: str) -> np.random.Generator:
            return make_rng(self.seed, "dp-noise", self.mechanism.name, party_id)

        return AggregationParties(
            server=DPServer(parties.server, self.mechanism, rng(parties.server.party_id)),
            clients={
                cid: DPClient(client, self.mechanism, rng(cid))
                for cid, client in parties.clients.items()
            },
            others=parties.others,
        )
