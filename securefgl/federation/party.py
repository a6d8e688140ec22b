"""Parties and the calls an executor makes on them.

A party (a client, the server, a key authority, a relay) is made of named *sub-parties*,
one per role it plays: ``train`` (its model), ``agg`` (its side of the aggregation
protocol), ``sums`` (its hosted secure sums), ``abar`` (FedStruct's Ā builder), …. A
:class:`Party` declares them in :attr:`Party.SUBPARTIES` (name → attribute path), so the
roles are explicit, typed attributes rather than strings resolved at run time.

The executor addresses one method of one sub-party with a :class:`Call`. Its arguments must
be wire-serialisable (:func:`check_wire_value`: numbers, strings, bytes, numpy arrays,
:class:`~protocols.wire.Payload`, :class:`~protocols.base.Envelope`, and lists, tuples and
string-keyed dicts of those), which is what lets parties live in other processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from protocols.base import Envelope
from protocols.wire import Payload

SERVER = "server"  # the id of the federation's server party

#: Sub-party names shared by several algorithms.
AGG = "agg"  # the aggregation protocol's party state (protocols.base.AggregationClient/Server)
SUMS = "sums"  # hosted secure sums (protocols.secure_sum.SecureSumClient/Server)
TRAIN = "train"  # the party's model and training


def client_party_id(client: int) -> str:
    """The party id of client ``client`` (``"client-3"``)."""
    return f"client-{int(client)}"


class PartyError(RuntimeError):
    """A call names a party, sub-party or method that does not exist or is not set up."""


class Call(NamedTuple):
    """``party.sub(sub).method(*args)``, run by an executor."""

    party: str
    sub: str
    method: str
    args: tuple[Any, ...] = ()


class Party:
    """A party: its id and its sub-parties.

    ``SUBPARTIES`` maps a sub-party name to an attribute path of the party (``""``: the
    party object itself; ``"adjacency.secure_hop"``: an attribute of an attribute). A
    sub-party that is ``None`` (not set up yet, e.g. a secure sum before it is hosted)
    raises :class:`PartyError` when called.
    """

    SUBPARTIES: ClassVar[Mapping[str, str]] = {}
    party_id: str

    def sub(self, name: str) -> Any:
        try:
            path = self.SUBPARTIES[name]
        except KeyError:
            raise PartyError(
                f"{self.party_id}: no sub-party {name!r} (has {sorted(self.SUBPARTIES)})"
            ) from None
        obj: Any = self
        for attr in path.split(".") if path else ():
            obj = getattr(obj, attr, None)
            if obj is None:
                raise PartyError(f"{self.party_id}: sub-party {name!r} is not set up")
        return obj


def check_wire_value(value: Any, where: str = "argument") -> None:
    """Raise ``TypeError`` unless ``value`` could cross the channel's wire format."""
    if value is None or isinstance(value, bool | int | float | str | bytes | np.generic):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: array of dtype {value.dtype} is not wire-serialisable")
        return
    if isinstance(value, Payload | Envelope):
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_wire_value(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict key {key!r} is not a string")
            check_wire_value(item, f"{where}[{key!r}]")
        return
    raise TypeError(f"{where}: {type(value).__name__} is not wire-serialisable")


class ProtocolHost(Party):
    """A party that only plays a protocol role (e.g. a key authority) as its ``agg``."""

    SUBPARTIES: ClassVar[Mapping[str, str]] = {AGG: "role"}

    def __init__(self, party_id: str, role: object) -> None:
        self.party_id = party_id
        self.role = role
