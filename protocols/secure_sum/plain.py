"""``plain``: every block travels in the clear through the server (FedStruct App. D baseline).

FedStruct (App. D, Algorithm 3) has client k send ``B_ijk`` to client i, which sums. Here the
server relays each block unchanged: a sparse block as COO (row, col, data of its non-zeros;
never densified), a dense one as its array.

Threat model: none. The receiver AND the server see every individual block: values,
sparsity pattern and (through message sizes) the number of non-zeros. This is the reference
the protected modes are checked against. A public support, if given, is still enforced
(same semantics as the other modes) but not needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from protocols.base import Inbox, ProtocolError
from protocols.secure_sum.blocks import Block, Total, canonical_coo, is_sparse
from protocols.secure_sum.jobs import SumRequest, gather
from protocols.secure_sum.parties import (
    SecureSum,
    SecureSumClient,
    SecureSumParties,
    SecureSumServer,
)
from protocols.wire import Payload


class PlainSumClient(SecureSumClient):
    def _encode(self, receiver: str, request: SumRequest, block: Block) -> Payload:
        if request.support is not None:
            gather(block, request, self.party_id)  # support check only
        if is_sparse(block):
            coo = canonical_coo(block)
            fields = {
                "row": coo.row.astype(np.int64),
                "col": coo.col.astype(np.int64),
                "data": coo.data.astype(np.float64),
            }
        else:
            fields = {"values": np.asarray(block, dtype=np.float64)}
        return Payload(fields, {})

    def _combine(self, request: SumRequest, deliveries: Inbox) -> Total:
        who = self.party_id
        senders = [e.payload.meta.get("sender") for e in deliveries]
        if sorted(senders, key=str) != sorted(request.senders):
            raise ProtocolError(f"{who}: got blocks from {senders}, expected {request.senders}")
        shape = request.shape
        if request.sparse_result:
            parts = [_as_coo(e.payload, shape, who) for e in deliveries]
            rows = np.concatenate([p[0] for p in parts])
            cols = np.concatenate([p[1] for p in parts])
            data = np.concatenate([p[2] for p in parts])
            total = sp.csr_array((data, (rows, cols)), shape=shape)  # sums duplicates
            total.eliminate_zeros()
            return total
        dense = np.zeros(shape, dtype=np.float64)
        for env in deliveries:
            if "values" in env.payload:
                dense += _dense_values(env.payload, shape, who)
            else:
                rows, cols, data = _as_coo(env.payload, shape, who)
                np.add.at(dense, (rows, cols), data)
        return dense


def _dense_values(payload: Payload, shape: tuple[int, ...], who: str) -> np.ndarray:
    values = payload.fields.get("values")
    if set(payload.fields) != {"values"} or not isinstance(values, np.ndarray):
        raise ProtocolError(f"{who}: garbled plain block from {payload.meta.get('sender')!r}")
    if values.dtype != np.float64 or values.shape != shape:
        raise ProtocolError(
            f"{who}: plain block from {payload.meta.get('sender')!r} is {values.dtype} "
            f"{values.shape}, expected float64 {shape}"
        )
    return values


def _as_coo(
    payload: Payload, shape: tuple[int, ...], who: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if "values" in payload:
        values = _dense_values(payload, shape, who)
        rows, cols = np.nonzero(values)
        return rows.astype(np.int64), cols.astype(np.int64), values[rows, cols]
    sender = payload.meta.get("sender")
    arrays = [payload.fields.get(n) for n in ("row", "col", "data")]
    if set(payload.fields) != {"row", "col", "data"} or not all(
        isinstance(a, np.ndarray) and a.ndim == 1 for a in arrays
    ):
        raise ProtocolError(f"{who}: garbled sparse block from {sender!r}")
    rows, cols, data = arrays
    assert isinstance(rows, np.ndarray) and isinstance(cols, np.ndarray)
    assert isinstance(data, np.ndarray)
    if (
        len(shape) != 2
        or rows.dtype != np.int64
        or cols.dtype != np.int64
        or data.dtype != np.float64
        or not rows.size == cols.size == data.size
        or (rows.size and (rows.min() < 0 or rows.max() >= shape[0]))
        or (cols.size and (cols.min() < 0 or cols.max() >= shape[1]))
    ):
        raise ProtocolError(f"{who}: sparse block from {sender!r} does not fit shape {shape}")
    return rows, cols, data


class PlainSumServer(SecureSumServer):
    def __init__(self, party_id: str, client_ids: Sequence[str], min_senders: int) -> None:
        super().__init__(party_id, client_ids, min_senders)
        self.encodes_entries = False  # blocks travel as they are (sparse as COO)

    def _aggregate(
        self, receiver: str, request: SumRequest, contributions: dict[str, Payload]
    ) -> list[Payload]:
        """Forward every block as is (the server could read them all)."""
        return [
            Payload(dict(p.fields), {"sender": k})
            for k in request.senders
            for p in [contributions[k]]
        ]


class PlainSum(SecureSum):
    """The paper's scheme: blocks in the clear; receiver and server see each one."""

    name: ClassVar[str] = "plain"

    def create_parties(self, server_id: str, client_ids: Sequence[str]) -> SecureSumParties:
        ids = self._check_ids(server_id, client_ids)
        return SecureSumParties(
            server=self._limited(PlainSumServer(server_id, ids, self.min_senders), len(ids)),
            clients={c: PlainSumClient(c, server_id, ids, self.min_senders) for c in ids},
        )
