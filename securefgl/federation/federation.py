"""The simulation context an algorithm runs in: the client views, the channel, the
protocol stack and the executor that hosts the parties (local or Ray)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocols.identity import Pki
from securefgl.data import ClientGraph
from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor, LocalExecutor
from securefgl.federation.party import Party, client_party_id
from securefgl.federation.recipes import Recipe
from securefgl.federation.stack import ProtocolStack


@dataclass
class Federation:
    """What a federated algorithm may use: the client views and the wiring between parties.

    There is no global graph here: only the simulator (and ``central``) holds it.
    """

    views: list[ClientGraph]
    channel: Channel
    stack: ProtocolStack
    seed: int
    progress: bool = False  # long set-up steps (e.g. FedStruct's Ā hops) may show a bar
    noise_seed: int | None = None  # privacy noise: None = secret (never the public seed)
    executor: str = "local"  # or "ray" (securefgl.federation.ray_executor)
    executor_options: dict[str, Any] = field(default_factory=dict)  # RayExecutor's keywords
    #: makes every executor instead (e.g. parties across organisations, securefgl.deploy);
    #: the parties make their own keys there, so no PKI is provisioned through it
    executor_factory: Callable[[Mapping[str, Party | Recipe]], Executor] | None = None
    _made: list[Executor] = field(default_factory=list, repr=False)
    _pkis: list[Pki] = field(default_factory=list, repr=False)

    def make_executor(
        self, parties: Mapping[str, Party | Recipe], stacks: Sequence[ProtocolStack] = ()
    ) -> Executor:
        """An executor for ``parties``; ``stacks``: the protocol stacks they run (default:
        the federation's), whose PKIs (malicious-server model) reach each party's worker
        as that party's own keys only."""
        pkis = [s.pki for s in stacks or [self.stack] if s.pki is not None]
        self._pkis.extend(pkis)
        if self.executor_factory is not None:
            made: Executor = self.executor_factory(parties)
        elif self.executor == "ray":
            from securefgl.federation.ray_executor import RayExecutor

            made = RayExecutor(
                parties,  # type: ignore[arg-type]
                keys=[pki.provisioning(parties) for pki in pkis],
                clients=[client_party_id(i) for i in range(len(self.views))],
                **self.executor_options,
            )
        else:
            made = LocalExecutor(parties)
        self._made.append(made)
        return made

    def close(self) -> None:
        """End the executors' remote workers (if any) and forget the signing keys this
        process holds for the run (malicious-server model)."""
        for executor in self._made:
            executor.shutdown()
        self._made.clear()
        for pki in [*self._pkis, self.stack.pki]:
            if pki is not None:
                pki.clear()
        self._pkis.clear()
