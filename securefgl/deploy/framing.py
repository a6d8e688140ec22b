"""Length-prefixed frames on a stream socket (standard library only: the Flower ClientApp
shim imports this and nothing else of securefgl)."""

from __future__ import annotations

import socket
import struct

_HEAD = struct.Struct("<Q")
MAX_FRAME = 1 << 31  # 2 GiB: far above any message the wire format accepts


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_HEAD.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = _HEAD.unpack(_recv(sock, _HEAD.size))
    if size > MAX_FRAME:
        raise ConnectionError(f"frame of {size} bytes refused")
    return _recv(sock, size)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        buf += chunk
    return bytes(buf)


def exchange(path: str, data: bytes, timeout: float | None = None) -> bytes:
    """Send one request to the Unix socket ``path``; its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        send_frame(sock, data)
        return recv_frame(sock)
