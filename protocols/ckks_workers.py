"""CKKS encryption and ciphertext sums on worker processes: one party's own cores, used
in parallel.

SEAL's encryption, called through ``tenseal.sealapi``, holds the GIL: threads do not run
it in parallel. An :class:`EncryptionPool` hands chunks of values to worker processes that
encrypt them; the blobs come back in order. Three uses:

- the ``ckks`` secure sums (FedGCN's neighbour sums move thousands of ciphertexts per hop)
  encrypt under the receiver's PUBLIC context (the bytes the server forwarded):
  :meth:`EncryptionPool.encrypt_all`; those workers get no secret key, unless the sums
  run under the key the clients share (``keys="shared"``);
- CKKS aggregation encrypts each client's update with the secret key the key authority
  sealed to it (symmetric, seeded ciphertexts): :meth:`EncryptionPool.encrypt_update`
  starts this as soon as the update is handed over, so it runs while the next client
  trains. The workers then hold that secret context, the one key all the aggregation's
  clients share;
- a server adds the ciphertexts it received (:meth:`EncryptionPool.add_all`): loading a
  ciphertext (parsing, checking it, expanding a seeded one) costs about a third of its
  encryption, so the workers load and add chunk ranges apart. The server's workers get the
  server's context only (parameters, or a public key): never a secret key.

Workers draw their randomness from SEAL's own generator (seeded from the operating system
in each process). Values, contexts and blobs move between a process and its own workers
only (``multiprocessing`` pipes on one machine), never over the channel.

Workers: ``SECUREFGL_CKKS_WORKERS`` (``0`` or ``1``: encrypt in-process), else the
machine's CPU count up to :data:`MAX_WORKERS`. Secure-sum batches under
:data:`MIN_CIPHERTEXTS` ciphertexts and updates under :data:`MIN_UPDATE_CIPHERTEXTS` stay
in-process (a worker's round trip costs about a ciphertext's encryption), and sums of fewer
than :data:`MIN_LOADS` ciphertexts are added in-process.
"""

from __future__ import annotations

import atexit
import hashlib
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tenseal as ts

from protocols.ckks_codec import CKKSCodec, CKKSParams, make_codec

ENV_WORKERS = "SECUREFGL_CKKS_WORKERS"
MAX_WORKERS = 8
MIN_CIPHERTEXTS = 32  # a secure-sum batch smaller than this is encrypted in-process
MIN_UPDATE_CIPHERTEXTS = 8  # an aggregation update smaller than this too
TASK_CIPHERTEXTS = 16  # ciphertexts per task handed to a worker
MIN_LOADS = 32  # a sum of fewer ciphertexts (all senders' chunks) is added in-process
TASKS_PER_WORKER = 2  # a sum is split into about this many chunk ranges per worker

_pool: ProcessPoolExecutor | None = None
_pool_size = 0


def worker_count() -> int:
    """Worker processes to use (``SECUREFGL_CKKS_WORKERS``, else the CPU count, at most
    :data:`MAX_WORKERS`); 1 means in-process."""
    raw = os.environ.get(ENV_WORKERS, "").strip()
    if raw:
        try:
            count = int(raw)
        except ValueError:
            raise ValueError(f"{ENV_WORKERS} must be a whole number, got {raw!r}") from None
        if count < 0:
            raise ValueError(f"{ENV_WORKERS} must be >= 0, got {count}")
        return max(count, 1)
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def _shared_pool(workers: int) -> ProcessPoolExecutor:
    """One pool per process, created on first use ("spawn": workers start clean, with no
    copy of the parent's memory or keys) and shut down at exit.

    A spawned process imports the parent's ``__main__`` first, so a user's script without a
    main guard would run again in every worker. While the workers start (all of them, at
    once), ``__main__`` points at this module instead.
    """
    global _pool, _pool_size
    if _pool is None or _pool_size != workers:
        if _pool is not None:
            _pool.shutdown(cancel_futures=True)
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        saved = sys.modules["__main__"]
        sys.modules["__main__"] = sys.modules[__name__]
        try:  # one task per worker: each submit starts a process while none is idle
            started = [pool.submit(os.getpid) for _ in range(workers)]
        finally:
            sys.modules["__main__"] = saved
        for f in started:
            f.result()
        _pool, _pool_size = pool, workers
    return _pool


@atexit.register
def _shutdown() -> None:
    if _pool is not None:
        _pool.shutdown(cancel_futures=True)


@dataclass
class PendingBlobs:
    """The ciphertext blobs of one vector, encrypted in-process or still on the workers."""

    done: list[bytes] = field(default_factory=list)
    futures: list[Future[list[bytes]]] = field(default_factory=list)

    def result(self) -> list[bytes]:
        """The blobs in order (waits for the workers)."""
        out = list(self.done)
        for f in self.futures:
            out.extend(f.result())
        return out


class EncryptionPool:
    """One party's CKKS work on its worker processes: encrypting many vectors, and adding
    the ciphertexts a server received."""

    def __init__(self, params: CKKSParams, workers: int | None = None) -> None:
        self.params = params
        self.workers = worker_count() if workers is None else max(int(workers), 1)

    def encrypt_all(
        self, jobs: list[tuple[bytes, CKKSCodec, np.ndarray]], secret: bool = False
    ) -> list[PendingBlobs]:
        """Start encrypting every ``(context bytes, in-process codec, values)`` job; the
        in-process codec serves when the batch is small or there is one worker. The
        contexts are public ones (a receiver's), or with ``secret`` the key the clients of
        a shared-key sum share (:mod:`protocols.secure_sum.ckks_shared`)."""
        per_ct = self.params.values_per_ciphertext
        total = sum(-(-v.size // per_ct) for _, _, v in jobs)
        if self.workers <= 1 or total < MIN_CIPHERTEXTS:
            return [PendingBlobs(done=codec.encrypt(v)) for _, codec, v in jobs]
        pool = _shared_pool(self.workers)
        return [self._submit(pool, blob, values, secret=secret) for blob, _, values in jobs]

    def encrypt_update(
        self, secret_context: bytes, codec: CKKSCodec, values: np.ndarray
    ) -> PendingBlobs:
        """Start encrypting one aggregation update under the shared secret context (its
        serialized bytes, and this party's in-process codec for small updates)."""
        per_ct = self.params.values_per_ciphertext
        if self.workers <= 1 or -(-values.size // per_ct) < MIN_UPDATE_CIPHERTEXTS:
            return PendingBlobs(done=codec.encrypt(values))
        return self._submit(_shared_pool(self.workers), secret_context, values, secret=True)

    def add_all(
        self,
        context: bytes,
        codec: CKKSCodec,
        contributions: Sequence[tuple[str, Sequence[bytes]]],
        sizes: Sequence[int],
    ) -> list[bytes]:
        """The chunkwise sums of every ``(label, blobs)`` contribution, as blobs of the
        expanded sums. Each blob is loaded and checked like :meth:`CKKSCodec.load` (a
        :class:`~protocols.ckks_codec.CiphertextError` names ``label[chunk]``). ``context``:
        the adding party's context, serialized; it must hold no secret key. ``codec``: the
        same context in-process, which serves small sums and a single worker."""
        if not contributions:
            raise ValueError("a sum needs at least one contribution")
        labels = [label for label, _ in contributions]
        columns = [[blobs[j] for _, blobs in contributions] for j in range(len(sizes))]
        if self.workers <= 1 or len(labels) * len(sizes) < MIN_LOADS:
            return _add_columns(codec, labels, list(sizes), 0, columns)
        pool = _shared_pool(self.workers)
        step = max(1, -(-len(sizes) // (TASKS_PER_WORKER * self.workers)))
        key = hashlib.sha256(context).digest()
        futures = [
            pool.submit(_add_chunk, key, context, self.params, labels, list(sizes[i : i + step]),
                        i, columns[i : i + step])  # fmt: skip
            for i in range(0, len(sizes), step)
        ]
        return [blob for f in futures for blob in f.result()]

    def _submit(
        self, pool: ProcessPoolExecutor, context: bytes, values: np.ndarray, secret: bool
    ) -> PendingBlobs:
        step = TASK_CIPHERTEXTS * self.params.values_per_ciphertext
        key = hashlib.sha256(context).digest()
        futures = [
            pool.submit(_encrypt_chunk, key, context, self.params, values[i : i + step], secret)
            for i in range(0, values.size, step)
        ]
        return PendingBlobs(futures=futures)


# ------------------------------------------------------------------------- worker side

_codecs: dict[bytes, CKKSCodec] = {}  # per worker process: context digest -> codec


def _worker_codec(key: bytes, blob: bytes, params: CKKSParams, secret: bool) -> CKKSCodec:
    """The codec of the context ``blob`` (cached by its digest ``key``), which must hold a
    secret key exactly when ``secret``."""
    codec = _codecs.get(key)
    if codec is None:
        ctx = ts.context_from(blob, n_threads=1)
        if ctx.is_private() != secret:
            kind = "a secret" if secret else "a public"
            raise ValueError(f"this task runs under {kind} context only")
        if len(_codecs) >= 256:
            _codecs.clear()
        codec = _codecs[key] = make_codec(ctx, params)
    return codec


def _encrypt_chunk(
    key: bytes, blob: bytes, params: CKKSParams, values: np.ndarray, secret: bool = False
) -> list[bytes]:
    """Worker: encrypt ``values`` under the context ``blob``: a public context for a
    secure sum, the secret one for an aggregation update or a shared-key sum (``secret``)."""
    codec = _worker_codec(key, blob, params, secret)
    return codec.encrypt(np.asarray(values, dtype=np.float64))


def _add_chunk(
    key: bytes, blob: bytes, params: CKKSParams, labels: list[str], sizes: list[int],
    start: int, columns: list[list[bytes]],
) -> list[bytes]:  # fmt: skip
    """Worker: the sums of chunks ``start, start + 1, ...`` under the server's context
    ``blob`` (no secret key)."""
    return _add_columns(_worker_codec(key, blob, params, False), labels, sizes, start, columns)


def _add_columns(
    codec: CKKSCodec, labels: list[str], sizes: list[int], start: int,
    columns: list[list[bytes]],
) -> list[bytes]:  # fmt: skip
    """``columns[j]``: every contribution's blob of chunk ``start + j``; their sums, dumped."""
    out = []
    for j, (size, column) in enumerate(zip(sizes, columns, strict=True)):
        total: Any = None
        for label, blob in zip(labels, column, strict=True):
            ct = codec.load(blob, size, f"{label}[{start + j}]")
            if total is None:
                total = ct
            else:
                codec.add_(total, ct)
        out.append(codec.dump(total))
    return out
