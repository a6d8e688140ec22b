"""What the server can read of each client's update, from its transcript view.

Over ``plain`` (also under ``clip_noise`` in central mode and under LDP, which transform
the update before it is sent in the clear) the server receives ``plain/update`` with
``weighted = weight · update`` and the weight in the metadata. Under ``secagg`` /
``secagg+`` it receives only pairwise-masked vectors in Z_2^w (w = 32 or 64), under ``ckks`` only
ciphertexts under a key it does not hold: no individual update is readable, and the
attacks that need one say so (:func:`individual_update_or_reason`).
"""

from __future__ import annotations

import numpy as np

from protocols.plain import TAG as PLAIN_TAG
from securefgl.federation.transcript import PartyView, Transcript

PROTECTED_TAGS = {
    "secagg/masked-input": "the server received only pairwise-masked inputs (SecAgg): "
    "it learns the sum of the clients' updates, never an individual one",
    "ckks/update": "the server received only CKKS ciphertexts under a key it does not hold: "
    "it cannot decrypt any update (the aggregate goes to the clients)",
}


def individual_update_or_reason(
    view: PartyView, client: str, round_idx: int
) -> tuple[np.ndarray, float] | str:
    """``(update, weight)`` the server read from ``client`` in ``round_idx``, or why not."""
    for env in view.messages(PLAIN_TAG, round_idx):
        if env.sender == client:
            weight = float(env.payload.meta["weight"])
            return env.payload.array("weighted") / weight, weight
    for env in view.messages(round=round_idx):
        if env.sender == client and env.tag in PROTECTED_TAGS:
            return PROTECTED_TAGS[env.tag]
    return f"the server received no update from {client} in round {round_idx}"


def model_sent(transcript: Transcript, sender: str, tag: str, round_idx: int) -> np.ndarray | None:
    """The model ``sender`` broadcast with ``tag`` in ``round_idx`` (its own knowledge)."""
    for e in transcript.sent_by(sender):
        if e.tag == tag and e.round == round_idx:
            return e.payload().array("params").astype(np.float64)
    return None
