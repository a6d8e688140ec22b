"""Federation runtime: parties talk only through the Channel, which records a Transcript."""

from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor, LocalExecutor
from securefgl.federation.party import (
    SERVER,
    Call,
    Party,
    PartyError,
    ProtocolHost,
    Target,
    client_party_id,
)
from securefgl.federation.transcript import PartyView, Transcript, TranscriptEntry

__all__ = [
    "SERVER",
    "Call",
    "Channel",
    "Executor",
    "LocalExecutor",
    "Party",
    "PartyError",
    "PartyView",
    "ProtocolHost",
    "Target",
    "Transcript",
    "TranscriptEntry",
    "client_party_id",
]
