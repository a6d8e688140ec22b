"""A server that tampers with one message family: the transmit the protocol tests hand to
their runs."""

from __future__ import annotations

from collections.abc import Callable

from protocols.base import Envelope, no_transport


def edit_transmit(tag: str, edit: Callable[[Envelope], None]) -> Callable[..., list[Envelope]]:
    """A transmit that edits (in place) every envelope with ``tag`` after serialization:
    what a server that tampers with one message family sends on."""

    def transmit(envelopes: list[Envelope]) -> list[Envelope]:
        out = no_transport(envelopes)
        for env in out:
            if env.tag == tag:
                edit(env)
        return out

    return transmit
