"""The parties' daemons reached directly on their Unix sockets: one machine, no Flower
(tests, and a quick check of a deployment's parties before Flower carries them)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from securefgl.deploy.framing import exchange
from securefgl.federation.remote import Silence, Transport


class SocketTransport(Transport):
    """Endpoints are socket paths; each request is sent on its own connection."""

    def __init__(self, sockets: Sequence[str | Path]) -> None:
        self.sockets = [str(s) for s in sockets]
        self.pool = ThreadPoolExecutor(max_workers=max(len(self.sockets), 1))

    def endpoints(self, expected: int, wait: float) -> list[str]:
        deadline = time.monotonic() + wait
        while True:
            up = [s for s in self.sockets if Path(s).exists()]
            if len(up) >= expected or time.monotonic() > deadline:
                return up
            time.sleep(0.1)

    def push(self, requests: Mapping[str, bytes]) -> dict[str, Future[bytes]]:
        return {e: self.pool.submit(exchange, e, data) for e, data in requests.items()}

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
