"""Federation runtime: parties talk only through the Channel, which records a Transcript."""

from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor, LocalExecutor
from securefgl.federation.party import (
    AGG,
    SERVER,
    SUMS,
    TRAIN,
    Call,
    Party,
    PartyError,
    ProtocolHost,
    client_party_id,
)
from securefgl.federation.transcript import PartyView, Transcript, TranscriptEntry

__all__ = [
    "AGG",
    "SERVER",
    "SUMS",
    "TRAIN",
    "Call",
    "Channel",
    "Executor",
    "LocalExecutor",
    "Party",
    "PartyError",
    "PartyView",
    "ProtocolHost",
    "Transcript",
    "TranscriptEntry",
    "client_party_id",
]
