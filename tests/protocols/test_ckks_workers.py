"""CKKS encryption and ciphertext sums on worker processes: the same sums as in-process,
the knob's checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from protocols import ckks_workers
from protocols.ckks_codec import CiphertextError, make_codec
from protocols.ckks_workers import EncryptionPool, worker_count
from protocols.secure_sum.ckks import (
    DEFAULT_PARAMS,
    load_public_context,
    make_keypair_context,
    serialize_public_key_context,
)
from tests.protocols.secure_sum.helpers import client_ids, run_mode

ROOT = Path(__file__).resolve().parents[2]


def test_worker_count_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ckks_workers.ENV_WORKERS, "3")
    assert worker_count() == 3
    monkeypatch.setenv(ckks_workers.ENV_WORKERS, "0")
    assert worker_count() == 1  # 0 and 1: in-process
    for bad in ("two", "-1"):
        monkeypatch.setenv(ckks_workers.ENV_WORKERS, bad)
        with pytest.raises(ValueError, match=ckks_workers.ENV_WORKERS):
            worker_count()
    monkeypatch.delenv(ckks_workers.ENV_WORKERS)
    assert 1 <= worker_count() <= ckks_workers.MAX_WORKERS


def test_workers_encrypt_what_the_receiver_decrypts() -> None:
    params = DEFAULT_PARAMS
    secret = make_keypair_context(params)
    blob = serialize_public_key_context(secret)
    public = make_codec(load_public_context(blob, params, "test"), params)
    per_ct = params.values_per_ciphertext
    rng = np.random.default_rng(0)
    sizes = [ckks_workers.MIN_CIPHERTEXTS * per_ct - 5, 3 * per_ct + 1]  # enough for workers
    values = [rng.uniform(-1, 1, n) for n in sizes]
    pending = EncryptionPool(params, workers=2).encrypt_all([(blob, public, v) for v in values])
    assert all(p.futures and not p.done for p in pending)  # it did go to the workers
    own = make_codec(secret, params)
    for v, p in zip(values, pending, strict=True):
        blobs = p.result()
        chunks = own.sizes(v.size)
        assert len(blobs) == len(chunks)
        got = np.concatenate(
            [own.decrypt(own.load(b, n, "test"), n) for b, n in zip(blobs, chunks, strict=True)]
        )
        np.testing.assert_allclose(got, v, atol=1e-6)


def test_small_batches_stay_in_process() -> None:
    params = DEFAULT_PARAMS
    blob = serialize_public_key_context(make_keypair_context(params))
    codec = make_codec(load_public_context(blob, params, "test"), params)
    (pending,) = EncryptionPool(params, workers=2).encrypt_all([(blob, codec, np.ones(10))])
    assert pending.done and not pending.futures


@pytest.mark.parametrize("mode", ["ckks", "ckks-shared"])
def test_ckks_sum_on_workers_matches_in_process(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n, d = 4, ckks_workers.MIN_CIPHERTEXTS * DEFAULT_PARAMS.values_per_ciphertext // 2
    rng = np.random.default_rng(3)
    ids = client_ids(n)
    jobs = {r: {k: rng.uniform(-1, 1, (2, d)) for k in ids if k != r} for r in ids}
    totals, pools = {}, []
    real = ckks_workers._shared_pool
    monkeypatch.setattr(ckks_workers, "_shared_pool", lambda w: pools.append(w) or real(w))
    for workers in ("1", "2"):
        monkeypatch.setenv(ckks_workers.ENV_WORKERS, workers)
        totals[workers] = {r: res.total for r, res in run_mode(mode, n, jobs).items()}
        # every sender encrypted, and the server added every receiver's sum, on the workers
        assert len(pools) == (0 if workers == "1" else 2 * n)
    pools.clear()
    for r in ids:
        expected = sum(jobs[r].values())
        for workers, got in totals.items():
            np.testing.assert_allclose(got[r], expected, atol=1e-6, err_msg=workers)


def _summing_setup(senders: int, chunks: int) -> tuple:
    """A public context (bytes, server codec), the owner's codec and every sender's blobs."""
    params = DEFAULT_PARAMS
    secret = make_keypair_context(params)
    blob = serialize_public_key_context(secret)
    server = make_codec(load_public_context(blob, params, "test"), params)
    size = chunks * params.values_per_ciphertext - 7  # a short last chunk
    rng = np.random.default_rng(11)
    values = [rng.uniform(-1, 1, size) for _ in range(senders)]
    parts = [(f"from c{k}", server.encrypt(v)) for k, v in enumerate(values)]
    return blob, server, make_codec(secret, params), server.sizes(size), parts, sum(values)


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_add_what_the_server_adds_in_process(workers: int) -> None:
    blob, server, owner, sizes, parts, expected = _summing_setup(senders=3, chunks=13)
    assert len(parts) * len(sizes) >= ckks_workers.MIN_LOADS  # large enough for the workers
    sums = EncryptionPool(DEFAULT_PARAMS, workers=workers).add_all(blob, server, parts, sizes)
    assert len(sums) == len(sizes)
    got = np.concatenate([owner.decrypt(owner.load(b, n, "sum"), n)
                          for b, n in zip(sums, sizes, strict=True)])  # fmt: skip
    np.testing.assert_allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_garbled_ciphertext_is_named_by_its_sender_and_chunk(workers: int) -> None:
    blob, server, _, sizes, parts, _ = _summing_setup(senders=3, chunks=13)
    label, blobs = parts[1]
    parts[1] = (label, [*blobs[:9], blobs[9][:-40], *blobs[10:]])
    with pytest.raises(CiphertextError, match=r"from c1\[9\]"):
        EncryptionPool(DEFAULT_PARAMS, workers=workers).add_all(blob, server, parts, sizes)
    with pytest.raises(ValueError, match="at least one"):
        EncryptionPool(DEFAULT_PARAMS, workers=workers).add_all(blob, server, [], sizes)


def test_an_add_task_refuses_a_secret_context() -> None:
    """A server's workers hold the server's context only: never a secret key."""
    secret_blob = make_keypair_context(DEFAULT_PARAMS).serialize(save_secret_key=True)
    with pytest.raises(ValueError, match="public context only"):
        ckks_workers._add_chunk(b"k3", secret_blob, DEFAULT_PARAMS, ["x"], [4], 0, [[b""]])


def test_aggregation_updates_encrypt_on_the_workers_while_the_round_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CKKS aggregation starts each update's symmetric encryption at ``begin_round``; on 1 or
    2 workers the weighted mean is the same, and only updates of
    ``MIN_UPDATE_CIPHERTEXTS`` ciphertexts or more leave the process."""
    from protocols.base import aggregate, no_transport, setup_parties
    from protocols.registry import make_transport

    per_ct = DEFAULT_PARAMS.values_per_ciphertext
    big, small = ckks_workers.MIN_UPDATE_CIPHERTEXTS * per_ct, 3 * per_ct
    rng = np.random.default_rng(5)
    submitted: list[bool] = []
    real = ckks_workers.EncryptionPool._submit

    def spy(self, pool, context, values, secret):
        submitted.append(secret)
        return real(self, pool, context, values, secret)

    monkeypatch.setattr(ckks_workers.EncryptionPool, "_submit", spy)
    for threat_model in ("honest-but-curious", "malicious"):
        for dim in (big, small):
            inputs = {f"c{i}": (rng.uniform(-1, 1, dim), float(i + 1)) for i in range(3)}
            truth = sum(v * w for v, w in inputs.values()) / 6.0
            for workers in ("1", "2"):
                monkeypatch.setenv(ckks_workers.ENV_WORKERS, workers)
                submitted.clear()
                proto = make_transport("ckks", "workers", threat_model=threat_model)
                parties = proto.create_parties("server", list(inputs), dim)
                setup_parties(proto, parties, no_transport)
                got = aggregate(proto, parties, 0, inputs)
                np.testing.assert_allclose(got.mean, truth, atol=1e-6)
                on_workers = workers == "2" and dim == big
                assert submitted == ([True] * 3 if on_workers else [])


def test_a_task_refuses_the_other_kind_of_context() -> None:
    params = DEFAULT_PARAMS
    secret = make_keypair_context(params)
    public_blob = serialize_public_key_context(secret)
    secret_blob = secret.serialize(save_secret_key=True)
    with pytest.raises(ValueError, match="secret context only"):
        ckks_workers._encrypt_chunk(b"k1", public_blob, params, np.ones(4), secret=True)
    with pytest.raises(ValueError, match="public context only"):
        ckks_workers._encrypt_chunk(b"k2", secret_blob, params, np.ones(4), secret=False)


def test_a_script_without_a_main_guard_runs_once(tmp_path) -> None:
    """Workers start from this module, not from the user's ``__main__``."""
    script = tmp_path / "user_script.py"
    script.write_text(
        "import numpy as np\n"
        "from protocols.ckks_codec import make_codec\n"
        "from protocols.ckks_workers import EncryptionPool\n"
        "from protocols.secure_sum.ckks import (DEFAULT_PARAMS, load_public_context,\n"
        "    make_keypair_context, serialize_public_key_context)\n"
        "print('script body', flush=True)\n"
        "blob = serialize_public_key_context(make_keypair_context(DEFAULT_PARAMS))\n"
        "codec = make_codec(load_public_context(blob, DEFAULT_PARAMS, 'x'), DEFAULT_PARAMS)\n"
        "values = np.ones(40 * DEFAULT_PARAMS.values_per_ciphertext)\n"
        "(p,) = EncryptionPool(DEFAULT_PARAMS, workers=2).encrypt_all([(blob, codec, values)])\n"
        "print(len(p.futures) > 0, len(p.result()), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["script body", "True 40"]
