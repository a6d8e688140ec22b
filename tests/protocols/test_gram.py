"""The Gram protocol: correct inner products; under ckks the server sees only ciphertexts and
holds no secret key, and only k×k matrices are decrypted."""

import numpy as np
import pytest

from protocols.base import Envelope, ProtocolError, default_invoke, no_transport, run_phases
from protocols.gram import TAG_MATRICES, TAG_PRODUCTS, TAG_VECTORS, GramProtocol
from protocols.wire import Payload

DIMS = {"a": 9, "b": 3}


def run(mode: str, k: int = 5, seed: int = 0):
    proto = GramProtocol(mode)
    ids = [f"c{i}" for i in range(k)]
    parties = proto.create_parties("server", ids, DIMS)
    log: list[Envelope] = []

    def transmit(envs):
        log.extend(envs)
        return no_transport(envs)

    invoke = default_invoke(parties.by_id())
    run_phases(proto.setup_phases, parties.roles(), invoke, transmit)
    rng = np.random.default_rng(seed)
    u = {n: rng.normal(size=(k, d)) for n, d in DIMS.items()}
    u = {n: x / np.linalg.norm(x, axis=1, keepdims=True) for n, x in u.items()}
    for i, c in enumerate(ids):
        parties.clients[c].begin_round(0, {n: u[n][i] for n in DIMS})
    parties.server.begin_round(0)
    run_phases(proto.round_phases, parties.roles(), invoke, transmit)
    return parties, u, log


@pytest.mark.parametrize("mode", ["plain", "ckks"])
def test_gram_matrices_are_the_inner_products(mode):
    parties, u, _ = run(mode)
    result = parties.server.result()
    for n in DIMS:
        tol = 1e-12 if mode == "plain" else 1e-3
        assert np.abs(result[n] - u[n] @ u[n].T).max() < tol


def test_ckks_server_sees_no_vector_and_holds_no_secret_key():
    parties, u, log = run("ckks")
    assert not parties.server._ctx.is_private()
    to_server = [e for e in log if e.receiver == "server"]
    for env in to_server:
        if env.tag == TAG_VECTORS:
            assert set(env.payload.fields) == {"ct", "ct_len"}  # ciphertext blobs only
            blob = env.payload.blob("ct")
            for n in DIMS:
                own = u[n][int(env.sender[1:])]
                assert own.astype(np.float64).tobytes() not in blob
    (decrypted,) = [e for e in log if e.tag == TAG_MATRICES]
    assert {k: v.shape for k, v in decrypted.payload.fields.items()} == {n: (5, 5) for n in DIMS}
    (products,) = [e for e in log if e.tag == TAG_PRODUCTS]
    assert products.receiver == "gram-authority" and products.sender == "server"


def test_missing_client_and_garbled_products_abort():
    proto = GramProtocol("plain")
    parties = proto.create_parties("server", ["c0", "c1"], DIMS)
    parties.server.begin_round(0)
    with pytest.raises(ProtocolError, match="no vectors"):
        parties.server.compute([])
    ckks, _, _ = run("ckks", k=3)
    bad = Envelope("server", "gram-authority", TAG_PRODUCTS,
                   Payload({"ct": b"xx", "ct_len": np.array([2], np.uint64)},
                           {"names": ["a"], "clients": 3}))  # fmt: skip
    with pytest.raises(ProtocolError, match="expected 3 ciphertexts"):
        ckks.authority.decrypt([bad])
    junk = Envelope("server", "gram-authority", TAG_PRODUCTS,
                    Payload({"ct": b"x" * 9, "ct_len": np.array([3, 3, 3], np.uint64)},
                            {"names": ["a"], "clients": 3}))  # fmt: skip
    with pytest.raises(ProtocolError, match="not a ciphertext"):
        ckks.authority.decrypt([junk])
