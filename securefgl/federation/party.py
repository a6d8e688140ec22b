"""Parties and the calls an executor makes on them.

A party (a client, the server, a key authority, a relay) answers calls through its *roles*:
the objects it returns from :meth:`Party.roles` (itself, its side of the aggregation
protocol, its hosted secure sums, FedStruct's Ā builder, …). A call names its method by
reference, ``Call.to(party_id, AdjacencyClient.host_secure_hop, spec, …)``: a type checker
follows the method and checks the arguments against its signature, and the executor runs
it on the party's role that is an instance of the class declaring the method (the typed
role interface; a subclass's override runs, as for any method call). A protocol phase
(:func:`protocols.base.run_phases`) is a call of the phase's method on the party's role
that is an instance of one of the protocol's party types.

A call's arguments must be wire-serialisable (:func:`check_wire_value`: numbers, strings,
bytes, numpy arrays, :class:`~protocols.wire.Payload`, :class:`~protocols.base.Envelope`,
and lists, tuples and string-keyed dicts of those), which is what lets parties live in
other processes; there the method travels as its declaring class's import path and name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, NamedTuple, ParamSpec, TypeVar

import numpy as np

from protocols.base import Envelope
from protocols.wire import Payload

SERVER = "server"  # the id of the federation's server party

P = ParamSpec("P")
R = TypeVar("R")


def client_party_id(client: int) -> str:
    """The party id of client ``client`` (``"client-3"``)."""
    return f"client-{int(client)}"


class PartyError(RuntimeError):
    """A call names a party, role or method that does not exist or is not set up."""


def class_path(cls: type) -> str:
    """``"package.module:Outer.Inner"``: where a class can be imported from."""
    return f"{cls.__module__}:{cls.__qualname__}"


def import_class(path: str) -> type:
    """The class at ``path`` (:func:`class_path`); :class:`PartyError` if there is none."""
    module_name, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PartyError(f"no class {path!r}: {exc}") from None
    if not isinstance(obj, type):
        raise PartyError(f"{path!r} is not a class")
    if class_path(obj) != path:  # only a class's own name: no Party.__base__, no aliases
        raise PartyError(f"{path!r} names {class_path(obj)!r}, not a class of its own")
    return obj


@dataclass(frozen=True)
class Target(Generic[R]):
    """A method by reference: its name and the role interfaces that declare it.

    ``interfaces`` is the class that defines the method (a :meth:`Call.to` target), or a
    protocol's party types (a phase). ``function`` is the method itself when known in this
    process; a party answers with the role that is an instance of an interface (several
    roles of one party matching is an error), running ``getattr(role, method)``.
    """

    interfaces: tuple[type, ...]
    method: str
    function: Callable[..., R] | None = None

    @classmethod
    def of(cls, function: Callable[..., R]) -> Target[R]:
        """The target of a method given as ``Class.method``."""
        name = getattr(function, "__name__", "")
        qualname = getattr(function, "__qualname__", "")
        owner_name, _, method = qualname.rpartition(".")
        if not owner_name or method != name or name.startswith("_"):
            raise TypeError(f"{function!r} is not a public method given as Class.method")
        if "<locals>" in owner_name:  # a class defined in a function: this process only
            return cls((), name, function)
        owner = import_class(f"{function.__module__}:{owner_name}")
        if vars(owner).get(name) is not function:
            raise TypeError(f"{qualname} is not defined on {owner.__name__}")
        return cls((owner,), name, function)

    @classmethod
    def phase(cls, method: str, interfaces: Sequence[type]) -> Target[Any]:
        """A protocol phase: ``method`` of the role that is one of ``interfaces``."""
        return cls(tuple(interfaces), method)

    @property
    def label(self) -> str:
        owners = [i.__name__ for i in self.interfaces] or [
            getattr(self.function, "__qualname__", "?").rpartition(".")[0]
        ]
        return f"{'|'.join(owners)}.{self.method}"

    def to_wire(self) -> tuple[list[str], str]:
        if not self.interfaces:
            raise PartyError(f"{self.label}: a class defined in a function cannot be named in "
                             "another process")  # fmt: skip
        return [class_path(i) for i in self.interfaces], self.method

    @classmethod
    def from_wire(cls, interfaces: Sequence[str], method: str) -> Target[Any]:
        if not isinstance(method, str) or not method or method.startswith("_"):
            raise PartyError(f"{method!r}: private or missing methods cannot be called")
        return cls(tuple(import_class(p) for p in interfaces), method)

    def answers(self, role: object) -> bool:
        """Whether ``role`` is an instance of one of the interfaces (of the class that
        defines :attr:`function`, for a class defined in a function)."""
        if self.interfaces:
            return isinstance(role, self.interfaces)
        return any(vars(k).get(self.method) is self.function for k in type(role).__mro__)

    def bind(self, party: Party) -> Callable[..., R]:
        """The bound method of ``party``'s role that answers this target."""
        found = [r for r in party.live_roles() if self.answers(r)]
        attachable = [i for i in self.interfaces if issubclass(i, AttachedRole)]
        if not found and len(attachable) == 1:
            found = [attachable[0].of(party)]
        if not found:
            raise PartyError(
                f"{party.party_id}: no role answers {self.label} (roles: "
                f"{[type(r).__name__ for r in party.live_roles()]}; not set up yet?)"
            )
        if len(found) > 1:
            raise PartyError(
                f"{party.party_id}: {len(found)} roles answer {self.label}: "
                f"{[type(r).__name__ for r in found]}"
            )
        fn = getattr(found[0], self.method, None)
        if not callable(fn):
            raise PartyError(f"{party.party_id}: {self.label}: no such method")
        return fn


class Call(NamedTuple):
    """``target`` run on party ``party`` with ``args`` and ``kwargs``."""

    party: str
    target: Target[Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # noqa: RUF012 - never mutated

    @classmethod
    def to(
        cls,
        party: str,
        method: Callable[Concatenate[Any, P], Any],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Call:
        """``party``'s ``method`` (given as ``Class.method``) with these arguments."""
        return cls(party, Target.of(method), tuple(args), dict(kwargs))

    @property
    def label(self) -> str:
        return f"{self.party}.{self.target.label}"


class Party:
    """A party: its id and the roles that answer calls for it (:meth:`roles`)."""

    party_id: str

    def roles(self) -> Iterable[object | None]:
        """The objects that answer this party's calls: itself, and the states of the roles
        it plays (None: a role that is not set up yet)."""
        return (self,)

    def live_roles(self) -> list[object]:
        """Its set-up roles, and the :class:`AttachedRole` s it took on."""
        attached = self.__dict__.get("_attached", {})
        return [*(r for r in self.roles() if r is not None), *attached.values()]


class AttachedRole:
    """A role any party takes on at the first call of one of its methods, made from the
    party itself (e.g. its side of a secure evaluation,
    :class:`~securefgl.federation.evaluation.EvaluationHost`)."""

    def __init__(self, party: Party) -> None:
        self.party = party

    @classmethod
    def of(cls, party: Party) -> AttachedRole:
        attached = party.__dict__.setdefault("_attached", {})
        if cls not in attached:
            attached[cls] = cls(party)
        return attached[cls]


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
    """A party that only plays a protocol role (e.g. a key authority)."""

    def __init__(self, party_id: str, role: object) -> None:
        self.party_id = party_id
        self.role = role

    def roles(self) -> Iterable[object | None]:
        return (self.role,)
