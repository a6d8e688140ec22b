"""CKKS parameters and ciphertext codecs: how values become ciphertext blobs and back.

Two packings (:attr:`CKKSParams.packing`):

* ``"complex"`` (the default of the aggregation and the secure sums): two reals per
  complex slot, ``x[2j] + i x[2j+1]``, so a ciphertext of ring degree N carries N reals, not
  N/2. Additions act on the real and imaginary parts apart, so a sum decodes to the sums of
  both halves (a product would mix them: this packing serves additions only). With
  ``seeded`` (default) and a party that holds the secret key, a ciphertext is encrypted
  symmetrically and its uniformly random half ``c1`` travels as the 64-byte seed it is
  expanded from (SEAL's seeded ciphertexts; expanded by whoever loads it), which halves the
  upload. Ciphertexts are SEAL's own serialization (zstd-compressed), about 8 bytes per real
  at a 60-bit data prime, 2x float32 (16 for an expanded ciphertext such as a sum, or one
  encrypted under a receiver's public key).
* ``"real"``: TenSEAL's :class:`tenseal.CKKSVector`, one real per slot, both halves sent:
  32 bytes per real at a 60-bit prime (the Gram protocol uses it: products need it).

What TenSEAL 0.3.18 allows: its ``CKKSVector`` encodes real vectors only and its context
encrypts into expanded ciphertexts (``TenSEALContext::encrypt`` calls SEAL's
``encrypt_symmetric(plain, destination)``), so neither saving is reachable through it. Its
SEAL bindings, ``tenseal.sealapi``, expose both: ``CKKSEncoder.encode`` of complex vectors
and ``Encryptor.encrypt_symmetric(plain)`` returning a seeded
``seal::Serializable<seal::Ciphertext>`` (its pybind signature); the objects of a TenSEAL
context (``seal_context().data``, ``secret_key().data``) are accepted
by them. But ``sealapi`` saves and loads ciphertexts only through a file path, never bytes:
this module goes through an anonymous in-memory file per thread (``memfd``; elsewhere a
private temporary file). Only ciphertexts pass through it, never a key. A public-key
ciphertext has no seed (its ``c1`` depends on the public key), so encryption under a
receiver's public key cannot be seeded.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tenseal as ts
from tenseal import sealapi

from protocols.wire import WireFormatError

#: HE Standard (Albrecht et al. 2018, table for ternary secrets), 128-bit classical
#: security: the largest total coefficient-modulus bit count per ring degree (SEAL's tc128).
MAX_COEFF_BITS_128 = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
MAX_PRIME_BITS = 60  # SEAL's limit on one prime of the coefficient modulus
PACKINGS = ("complex", "real")


class CiphertextError(WireFormatError):
    """A ciphertext blob does not parse or does not fit the protocol's CKKS parameters."""


@dataclass(frozen=True)
class CKKSParams:
    """CKKS parameters; the defaults are justified in ``docs/protocols.md``.

    ``coeff_mod_bit_sizes``: data primes first, then the special (key-switching) prime.
    ``round_bits``: decrypted sums are rounded to multiples of ``2^-round_bits``
    (``None``: no rounding). 20 bits (≈1e-6) sit well above the noise (≈1e-7 for 20
    clients), so an exact zero stays zero: an adaptive optimizer (Adam) downstream would
    otherwise blow noise on a zero coordinate up into a full step. ``packing`` and
    ``seeded``: the ciphertexts' form (module docstring); ``seeded`` needs ``"complex"``.
    """

    poly_modulus_degree: int = 4096
    coeff_mod_bit_sizes: tuple[int, ...] = (60, 40)
    scale_bits: int = 36
    round_bits: int | None = 20
    packing: str = "complex"
    seeded: bool = True

    def __post_init__(self) -> None:
        n, bits = self.poly_modulus_degree, tuple(self.coeff_mod_bit_sizes)
        if n not in MAX_COEFF_BITS_128:
            raise ValueError(f"poly_modulus_degree must be one of {sorted(MAX_COEFF_BITS_128)}")
        if len(bits) < 2:
            raise ValueError("TenSEAL needs at least a data prime and a special prime")
        if not all(isinstance(b, int) and 20 <= b <= MAX_PRIME_BITS for b in bits):
            raise ValueError(f"each prime must have 20..{MAX_PRIME_BITS} bits, got {bits}")
        if sum(bits) > MAX_COEFF_BITS_128[n]:
            raise ValueError(
                f"{sum(bits)} modulus bits at N={n} is below 128-bit security "
                f"(HE Standard allows at most {MAX_COEFF_BITS_128[n]})"
            )
        if not 20 <= self.scale_bits <= self.data_bits - 4:
            raise ValueError(
                f"scale_bits must be in 20..{self.data_bits - 4} (data modulus "
                f"{self.data_bits} bits); below 2^20 CKKS is too imprecise for updates"
            )
        if self.round_bits is not None and not 0 <= self.round_bits <= self.scale_bits - 8:
            raise ValueError("round_bits must be in 0..scale_bits-8 (coarser than the noise)")
        if self.packing not in PACKINGS:
            raise ValueError(f"packing must be one of {PACKINGS}, got {self.packing!r}")
        if self.seeded and self.packing != "complex":
            raise ValueError("seeded ciphertexts need packing='complex' (TenSEAL's CKKSVector "
                             "always sends both halves)")  # fmt: skip
        object.__setattr__(self, "coeff_mod_bit_sizes", bits)

    @property
    def slots(self) -> int:
        """Complex slots of one ciphertext (N/2)."""
        return self.poly_modulus_degree // 2

    @property
    def values_per_ciphertext(self) -> int:
        """Reals one ciphertext carries: N with ``"complex"`` packing, N/2 with ``"real"``."""
        return self.poly_modulus_degree if self.packing == "complex" else self.slots

    @property
    def data_bits(self) -> int:
        """Bits of the modulus a fresh ciphertext lives under (all but the special prime)."""
        return sum(self.coeff_mod_bit_sizes[:-1])

    @property
    def scale(self) -> float:
        return float(2**self.scale_bits)

    def n_chunks(self, dim: int) -> int:
        """Ciphertexts per update: ``dim`` values plus the weight."""
        return math.ceil((dim + 1) / self.values_per_ciphertext)

    def value_bound(self, n_clients: int) -> float:
        """Largest ``|w_i x_i|`` (and ``w_i``) a client may encrypt so no sum of
        ``n_clients`` of them exceeds half the headroom ``2^(data_bits - 1 - scale_bits)``."""
        return 2.0 ** (self.data_bits - 2 - self.scale_bits) / max(n_clients, 1)

    def make_context(self, asymmetric: bool = False) -> ts.Context:
        """A fresh private (secret-key) context, one thread; with ``asymmetric`` it also
        has a public key, so parties without the secret key can encrypt."""
        kind = ts.ENCRYPTION_TYPE.ASYMMETRIC if asymmetric else ts.ENCRYPTION_TYPE.SYMMETRIC
        ctx = ts.context(
            ts.SCHEME_TYPE.CKKS,
            self.poly_modulus_degree,
            coeff_mod_bit_sizes=list(self.coeff_mod_bit_sizes),
            encryption_type=kind,
            n_threads=1,  # SEAL objects are not thread-safe (PySyft #5404, SEAL #364)
        )
        ctx.global_scale = self.scale
        return ctx


def chunk_sizes(total: int, per_chunk: int) -> list[int]:
    """Values in each chunk of ``total`` values cut into chunks of ``per_chunk``."""
    return [min(per_chunk, total - i) for i in range(0, total, per_chunk)]


def encrypt_chunks(ctx: ts.Context, values: np.ndarray, slots: int) -> list[bytes]:
    """Encrypt ``values`` as ``ceil(len/slots)`` one-ciphertext CKKS vectors, serialized."""
    values = np.asarray(values, dtype=np.float64)
    return [
        ts.ckks_vector(ctx, values[i : i + slots]).serialize() for i in range(0, len(values), slots)
    ]


def _check_fresh(ct: Any, first: Any, params: CKKSParams, what: str) -> None:
    if ct.size() != 2 or ct.parms_id() != first or ct.scale != params.scale:
        raise CiphertextError(
            f"{what}: ciphertext has {ct.size()} parts, scale 2^{math.log2(ct.scale):g} "
            f"or a wrong level; expected a fresh 2-part ciphertext at 2^{params.scale_bits}"
        )
    if ct.is_transparent():
        raise CiphertextError(f"{what}: transparent (unencrypted) ciphertext")


def load_chunk(
    ctx: ts.Context, blob: bytes, size: int, params: CKKSParams, what: str
) -> ts.CKKSVector:
    """Parse one ciphertext blob and check it is a fresh-level, 2-part, ``size``-slot vector
    at the protocol's scale; raises :class:`CiphertextError` naming ``what`` otherwise."""
    if not isinstance(blob, bytes):
        raise CiphertextError(f"{what}: expected a byte blob, got {type(blob).__name__}")
    try:
        vec = ts.ckks_vector_from(ctx, blob)
        cts = vec.ciphertext()
    except (ValueError, RuntimeError, TypeError) as err:
        raise CiphertextError(f"{what}: not a CKKS ciphertext for this context ({err})") from err
    if vec.size() != size or len(cts) != 1:
        raise CiphertextError(
            f"{what}: {vec.size()} values in {len(cts)} ciphertexts, expected {size} in 1"
        )
    _check_fresh(cts[0], ctx.seal_context().data.first_parms_id(), params, what)
    return vec


class _Scratch:
    """One anonymous in-memory file per thread and process (``sealapi`` reads and writes
    ciphertexts only through paths): ciphertext bytes in and out, nothing else."""

    _local = threading.local()

    @classmethod
    def file(cls) -> tuple[int, str]:
        held = getattr(cls._local, "file", None)
        if held is not None and held[0] == os.getpid():
            return held[1], held[2]
        fd, path = cls._open()
        cls._local.file = (os.getpid(), fd, path)
        return fd, path

    @classmethod
    def _open(cls) -> tuple[int, str]:
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("securefgl-ckks", os.MFD_CLOEXEC)
            path = f"/proc/self/fd/{fd}"
            if os.path.exists(path):
                weakref.finalize(threading.current_thread(), os.close, fd)
                return fd, path
            os.close(fd)
        folder = tempfile.mkdtemp(prefix="securefgl-ckks-")  # mode 0700
        path = os.path.join(folder, "ciphertext")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        weakref.finalize(threading.current_thread(), _remove, fd, folder)
        return fd, path

    @classmethod
    def save(cls, obj: Any) -> bytes:
        """``obj.save(path)`` (a SEAL ciphertext or serializable), as bytes."""
        fd, path = cls.file()
        obj.save(path)  # opens the path anew, truncating
        return os.pread(fd, os.fstat(fd).st_size, 0)

    @classmethod
    def load(cls, seal_context: Any, blob: bytes) -> Any:
        """A SEAL ciphertext loaded (and validated by SEAL) from ``blob``."""
        fd, path = cls.file()
        os.ftruncate(fd, 0)
        if os.pwrite(fd, blob, 0) != len(blob):
            raise OSError("short write to the in-memory ciphertext file")  # pragma: no cover
        ct = sealapi.Ciphertext()
        ct.load(seal_context, path)
        return ct


def _remove(fd: int, folder: str) -> None:
    os.close(fd)
    shutil.rmtree(folder, ignore_errors=True)


class CKKSCodec:
    """One party's ciphertext codec for its context: encrypt values into blobs, load and
    check blobs, add ciphertexts, decrypt. :func:`make_codec` picks the packing's."""

    def __init__(self, ctx: ts.Context, params: CKKSParams) -> None:
        self.ctx, self.params = ctx, params
        self.per_ciphertext = params.values_per_ciphertext

    def sizes(self, total: int) -> list[int]:
        """Values per ciphertext of a vector of ``total`` values."""
        return chunk_sizes(total, self.per_ciphertext)

    def encrypt(self, values: np.ndarray) -> list[bytes]:
        raise NotImplementedError

    def load(self, blob: bytes, size: int, what: str) -> Any:
        """The ciphertext of one chunk of ``size`` values; :class:`CiphertextError` naming
        ``what`` unless it is a fresh 2-part ciphertext at the protocol's scale."""
        raise NotImplementedError

    def add_(self, acc: Any, other: Any) -> None:
        raise NotImplementedError

    def add_plain(self, ct: Any, values: Sequence[float]) -> Any:
        """``ct`` plus a plaintext (no key needed: what a server can do to a ciphertext)."""
        raise NotImplementedError

    def dump(self, ct: Any) -> bytes:
        raise NotImplementedError

    def decrypt(self, ct: Any, size: int) -> np.ndarray:
        raise NotImplementedError


class RealCodec(CKKSCodec):
    """TenSEAL's :class:`tenseal.CKKSVector`: one real per slot, expanded ciphertexts."""

    def encrypt(self, values: np.ndarray) -> list[bytes]:
        return encrypt_chunks(self.ctx, values, self.per_ciphertext)

    def load(self, blob: bytes, size: int, what: str) -> ts.CKKSVector:
        return load_chunk(self.ctx, blob, size, self.params, what)

    def add_(self, acc: ts.CKKSVector, other: ts.CKKSVector) -> None:
        acc.add_(other)

    def add_plain(self, ct: ts.CKKSVector, values: Sequence[float]) -> ts.CKKSVector:
        return ct + list(values)

    def dump(self, ct: ts.CKKSVector) -> bytes:
        return ct.serialize()

    def decrypt(self, ct: ts.CKKSVector, size: int) -> np.ndarray:
        return np.asarray(ct.decrypt(), dtype=np.float64)


class ComplexCodec(CKKSCodec):
    """Two reals per complex slot through ``tenseal.sealapi``; seeded symmetric ciphertexts
    when this party holds the secret key and ``params.seeded``."""

    def __init__(self, ctx: ts.Context, params: CKKSParams) -> None:
        super().__init__(ctx, params)
        self._seal = ctx.seal_context().data
        self._first = self._seal.first_parms_id()
        self._encoder = sealapi.CKKSEncoder(self._seal)
        self._evaluator = sealapi.Evaluator(self._seal)
        self._encryptor: Any = None
        self._decryptor: Any = None
        if ctx.has_secret_key():
            secret = ctx.secret_key().data
            self._encryptor = sealapi.Encryptor(self._seal, secret)
            self._decryptor = sealapi.Decryptor(self._seal, secret)
        elif _has_public_key(ctx):
            self._encryptor = sealapi.Encryptor(self._seal, ctx.public_key().data)

    def _plain(self, values: np.ndarray) -> Any:
        x = np.asarray(values, dtype=np.float64)
        if x.size % 2:
            x = np.append(x, 0.0)
        plain = sealapi.Plaintext()
        self._encoder.encode((x[0::2] + 1j * x[1::2]).tolist(), self._first,
                             self.params.scale, plain)  # fmt: skip
        return plain

    def encrypt(self, values: np.ndarray) -> list[bytes]:
        if self._encryptor is None:
            raise ValueError("this context holds no key to encrypt with")
        values = np.asarray(values, dtype=np.float64)
        seeded = self.params.seeded and self.ctx.has_secret_key()
        blobs = []
        for i in range(0, values.size, self.per_ciphertext):
            plain = self._plain(values[i : i + self.per_ciphertext])
            if seeded:
                blobs.append(_Scratch.save(self._encryptor.encrypt_symmetric(plain)))
                continue
            ct = sealapi.Ciphertext()
            if self.ctx.has_secret_key():
                self._encryptor.encrypt_symmetric(plain, ct)
            else:
                self._encryptor.encrypt(plain, ct)
            blobs.append(_Scratch.save(ct))
        return blobs

    def load(self, blob: bytes, size: int, what: str) -> Any:
        if not isinstance(blob, bytes):
            raise CiphertextError(f"{what}: expected a byte blob, got {type(blob).__name__}")
        if not 0 < size <= self.per_ciphertext:
            raise CiphertextError(f"{what}: {size} values do not fit one ciphertext")
        try:
            ct = _Scratch.load(self._seal, blob)
        except (ValueError, RuntimeError, TypeError) as err:
            raise CiphertextError(
                f"{what}: not a CKKS ciphertext for this context ({err})"
            ) from err
        _check_fresh(ct, self._first, self.params, what)
        return ct

    def add_(self, acc: Any, other: Any) -> None:
        self._evaluator.add_inplace(acc, other)

    def add_plain(self, ct: Any, values: Sequence[float]) -> Any:
        out = sealapi.Ciphertext()
        self._evaluator.add_plain(ct, self._plain(np.asarray(values, np.float64)), out)
        return out

    def dump(self, ct: Any) -> bytes:
        return _Scratch.save(ct)

    def decrypt(self, ct: Any, size: int) -> np.ndarray:
        if self._decryptor is None:
            raise ValueError("this context holds no secret key")
        plain = sealapi.Plaintext()
        self._decryptor.decrypt(ct, plain)
        z = np.asarray(self._encoder.decode_complex(plain), dtype=np.complex128)
        out = np.empty(2 * z.size, dtype=np.float64)
        out[0::2], out[1::2] = z.real, z.imag
        return out[:size]


def _has_public_key(ctx: ts.Context) -> bool:
    try:
        return bool(ctx.has_public_key())
    except ValueError:  # TenSEAL: "not supported for symmetric encryption"
        return False


def make_codec(ctx: ts.Context, params: CKKSParams) -> CKKSCodec:
    """The codec of ``params.packing`` for a party holding ``ctx``."""
    return ComplexCodec(ctx, params) if params.packing == "complex" else RealCodec(ctx, params)
