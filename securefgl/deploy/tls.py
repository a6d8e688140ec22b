"""Mutual TLS between the server organisation and each party's daemon (the transport
when no Flower SuperLink sits between them; ``deploy.toml``'s ``tls_ca`` and each party's
``address``).

Every party, and the server, makes its TLS key in its own process (:func:`tls_request`:
EC P-256 in ``keydir/tls.key``, mode 0600) and publishes a certificate request. The
registrar, which already signs the key registry, is the deployment's certificate
authority: it issues each request a certificate naming the party (:func:`issue`) and
publishes its CA certificate. A daemon accepts only TLS 1.3 connections whose client
certificate the CA issued to ``server``; the server accepts only daemons whose certificate
the CA issued (which party answers is then settled by the signed hello, as on every
transport). TLS authenticates the channel; the protocols' own signatures and sealed
shares do not depend on it.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from securefgl.deploy.framing import recv_frame, send_frame
from securefgl.deploy.keys import check_private, fingerprint
from securefgl.federation.remote import Silence, Transport

TLS_KEY, TLS_CERT, CA_KEY, CA_CERT = "tls.key", "tls.crt", "ca.key", "ca.crt"
VALID_DAYS = 30


def _write_private(path: Path, data: bytes) -> None:
    from securefgl.deploy.keys import _private_write

    _private_write(path, data)


def tls_request(keydir: Path, party_id: str, publish: Path | None = None) -> Path:
    """Make ``party_id``'s TLS key in ``keydir`` if missing; write its certificate request
    (``<party>.csr.pem``, in ``publish`` or ``keydir``) for the registrar; its path."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    path = Path(keydir) / TLS_KEY
    if path.exists():
        key = serialization.load_pem_private_key(check_private(path).read_bytes(), None)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        _write_private(path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ))  # fmt: skip
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party_id)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())  # type: ignore[arg-type]
    folder = Path(publish or keydir)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{party_id}.csr.pem"
    out.write_bytes(csr.public_bytes(serialization.Encoding.PEM))
    return out


def _ca(keydir: Path) -> tuple[Any, Any]:
    """The registrar's CA key and certificate, made on first use."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key_path, cert_path = Path(keydir) / CA_KEY, Path(keydir) / CA_CERT
    if key_path.exists():
        key = serialization.load_pem_private_key(check_private(key_path).read_bytes(), None)
        return key, x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    _write_private(key_path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))  # fmt: skip
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securefgl deployment CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                       critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def request_fingerprint(path: Path) -> str:
    """The fingerprint of the TLS key a certificate request carries (what ``register``
    prints beside the certificate it issues)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    csr = x509.load_pem_x509_csr(Path(path).read_bytes())
    return fingerprint(csr.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def issue(
    registrar_keydir: Path, requests: Sequence[Path], out: Path, parties: Sequence[str]
) -> dict[str, tuple[Path, str]]:
    """The registrar issues each certificate request (checked with its owner out of band,
    like the signing keys) a certificate for the name it asks for, which must be one of the
    registered ``parties`` (at most one request each), into ``out`` (``<party>.crt``, and
    the CA's ``ca.crt``); party -> (certificate path, the TLS key's fingerprint)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    checked: dict[str, tuple[Path, Any]] = {}  # every request checked before anything is issued
    for path in requests:
        csr = x509.load_pem_x509_csr(Path(path).read_bytes())
        if not csr.is_signature_valid:
            raise ValueError(f"{path}: the request's signature does not verify")
        party = str(csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
        if party not in parties or party in checked:
            raise ValueError(f"{path}: a request for {party!r}, which has no registered key "
                             "here or a second request")  # fmt: skip
        checked[party] = (Path(path), csr)
    ca_key, ca_cert = _ca(registrar_keydir)
    out.mkdir(parents=True, exist_ok=True)
    (out / CA_CERT).write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    now = dt.datetime.now(dt.UTC)
    issued: dict[str, tuple[Path, str]] = {}
    for party, (path, csr) in checked.items():
        cert = (
            x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca_cert.subject)
            .public_key(csr.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(ca_key, hashes.SHA256())
        )  # fmt: skip
        target = out / f"{party}.crt"
        target.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued[party] = (target, request_fingerprint(path))
    return issued


def _context(purpose: ssl.Purpose, keydir: Path, ca: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(purpose, cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    cert = Path(keydir) / TLS_CERT
    if not cert.is_file():
        raise FileNotFoundError(f"{cert}: no TLS certificate (the registrar issues it)")
    ctx.load_cert_chain(str(cert), str(check_private(Path(keydir) / TLS_KEY)))
    return ctx


def daemon_context(keydir: Path, ca: Path) -> ssl.SSLContext:
    """A daemon's side: its certificate; clients must present one the CA issued."""
    ctx = _context(ssl.Purpose.CLIENT_AUTH, keydir, ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_context(keydir: Path, ca: Path) -> ssl.SSLContext:
    """The server organisation's side: its certificate; the daemon's must be the CA's.
    Host names are not checked (the signed hello says which party answers)."""
    ctx = _context(ssl.Purpose.SERVER_AUTH, keydir, ca)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def peer_name(conn: ssl.SSLSocket) -> str:
    """The common name of the certificate the peer presented."""
    cert = conn.getpeercert() or {}
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def tls_exchange(address: str, data: bytes, ctx: ssl.SSLContext,
                 timeout: float | None = None) -> bytes:  # fmt: skip
    """One request to the daemon at ``address`` (``host:port``) over TLS; its reply."""
    raw = socket.create_connection(split_address(address), timeout=timeout)
    with raw, ctx.wrap_socket(raw) as conn:
        send_frame(conn, data)
        return recv_frame(conn)


class TlsTransport(Transport):
    """Endpoints are the daemons' ``host:port``; one TLS connection per request."""

    def __init__(self, addresses: Sequence[str], ctx: ssl.SSLContext) -> None:
        self.addresses = list(addresses)
        self.ctx = ctx
        self.pool = ThreadPoolExecutor(max_workers=max(len(self.addresses), 1))

    def endpoints(self, expected: int, wait: float) -> list[str]:
        deadline = time.monotonic() + wait
        while True:
            up = [a for a in self.addresses if _listening(a)]
            if len(up) >= expected or time.monotonic() > deadline:
                return up
            time.sleep(0.1)

    def push(self, requests: Mapping[str, bytes]) -> dict[str, Future[bytes]]:
        return {a: self.pool.submit(tls_exchange, a, d, self.ctx) for a, d in requests.items()}

    def collect(self, handle: Any, timeout: float | None) -> dict[str, bytes | Silence]:
        futures: dict[str, Future[bytes]] = handle
        wait(list(futures.values()), timeout=timeout)
        out: dict[str, bytes | Silence] = {}
        for endpoint, future in futures.items():
            if not future.done():
                out[endpoint] = Silence(f"timeout: no reply within {timeout} s")
            elif (err := future.exception()) is not None:
                out[endpoint] = Silence(f"unreachable: {type(err).__name__}: {err}")
            else:
                out[endpoint] = future.result()
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _listening(address: str) -> bool:
    try:
        socket.create_connection(split_address(address), timeout=2).close()
    except OSError:
        return False
    return True
