"""Federation runtime: parties talk only through the Channel, which records a Transcript."""

from securefgl.federation.channel import Channel
from securefgl.federation.executor import Executor, LocalExecutor
from securefgl.federation.transcript import PartyView, Transcript, TranscriptEntry

__all__ = ["Channel", "Executor", "LocalExecutor", "PartyView", "Transcript", "TranscriptEntry"]
