"""Flower's ClientApp for securefgl: a stateless shim between a SuperNode and the party's
own process (``securefgl party``).

Flower runs a ClientApp in a fresh process for every message (flwr 1.42) and the run's
submitter chooses the code it runs, so nothing of a party may live here: the shim passes
the request's bytes to the party's daemon on its Unix socket and the daemon's bytes back.
It never decodes them (no pickle; it imports only Flower and the standard library). The
socket is the node's ``--node-config party-socket="..."`` (deployment engine), or, under
the simulation engine, the socket of the virtual node's ``partition-id``.
"""

from __future__ import annotations

from collections.abc import Sequence

from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp

from securefgl.deploy.framing import exchange

RECORD = "sfgl"
ACTION = "sfgl"  # messages of type "query.sfgl"
UNREACHABLE = 901  # Error code: the party's daemon did not answer (the party is silent)


def forward(msg: Message, socket: str) -> Message:
    try:
        reply = exchange(socket, bytes(msg.content[RECORD]["request"]))
    except OSError as err:
        return Message(Error(UNREACHABLE, f"party daemon unreachable: {err}"), reply_to=msg)
    return Message(RecordDict({RECORD: ConfigRecord({"reply": reply})}), reply_to=msg)


app = ClientApp()


@app.query(ACTION)
def query(msg: Message, context: Context) -> Message:
    return forward(msg, str(context.node_config["party-socket"]))


def simulation_app(sockets: Sequence[str]) -> ClientApp:
    """The shim for the simulation engine: virtual node ``k`` reaches ``sockets[k]``."""
    sim = ClientApp()
    paths = [str(s) for s in sockets]

    @sim.query(ACTION)
    def sim_query(msg: Message, context: Context) -> Message:
        return forward(msg, paths[int(context.node_config["partition-id"])])

    return sim
