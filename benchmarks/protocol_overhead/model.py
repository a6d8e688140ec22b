"""The cost model: per-client primitive limits, predicted time / memory / bytes of a cell
(scaled by measured / predicted ratios of earlier cells), and a cell's result row."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from benchmarks.protocol_overhead.cells import (
    BYTES_TARGET_MIN_DIM,
    CKKS_BYTES_TARGET,
    CKKS_PARAMS,
    N_DISTINCT_INPUTS,
    SECAGG_BYTES_TARGET,
    SECAGG_TARGET,
    VALUE_BOUND,
    Cell,
    ckks_chunks,
    mask_degree,
    ring_bits,
)
from benchmarks.protocol_overhead.primitives import Primitives
from protocols.secagg.messages import SEALED_BYTES, SHARE_BYTES


def limit_of(cell: Cell, prims: Primitives) -> dict[str, Any]:
    """Per-client primitive limit (seconds) and its derivation."""
    d, n = cell.dim, cell.clients
    if cell.protocol in ("secagg", "secagg+"):
        k = mask_degree(cell.protocol, n)
        prg = prims.prg_limit(d)
        masks, agreements = k + 1, 2 * k
        width = ring_bits(cell.protocol, n) / 64  # mask keystream in uint64 words per value
        return {
            "limit_seconds": masks * d * width / prg + agreements * prims.agree_limit,
            "limit_basis": {
                "mask_neighbours": k,
                "masks": masks,
                "key_agreements": agreements,
                "ring_bits": ring_bits(cell.protocol, n),
                "prg_uint64_per_s": prg,
                "x25519_agree_s": prims.agree_limit,
                "formula": "(k + 1) * d * (w / 64) / prg + 2 k * agree (w: the ring's bits)",
            },
        }
    if cell.protocol == "ckks":
        rate = prims.ckks_limit(d)
        return {
            "limit_seconds": d / rate if rate else None,
            "limit_basis": {"ckks_floats_per_s": rate, "formula": "d / encrypt throughput"},
        }
    rate = prims.nearest(prims.memcpy_bytes_per_s, d)
    return {
        "limit_seconds": 8 * d / rate,
        "limit_basis": {
            "memcpy_bytes_per_s": rate,
            "formula": "8 d / memcpy throughput (the client's w * x pass over its update)",
        },
    }


def server_limit_of(cell: Cell, prims: Primitives) -> float | None:
    """Server-side primitive limit: the masks it must regenerate / the sums it must add."""
    d, n, drop = cell.dim, cell.clients, cell.n_dropped
    if cell.protocol in ("secagg", "secagg+"):
        words = d * ring_bits(cell.protocol, n) / 64  # keystream per mask, in uint64 words
        if cell.dropped_in_sum:  # self masks of all n clients; pairwise masks cancel
            return n * words / prims.prg_limit(d)
        # self masks of the survivors + the pairwise masks of each dropped client
        k = mask_degree(cell.protocol, n)
        masks = (n - drop) + drop * k
        return masks * words / prims.prg_limit(d) + drop * k * prims.agree_limit
    if cell.protocol == "ckks":
        add = prims.ckks_chunk.get("add_s")
        return n * ckks_chunks(d) * add if add else None
    return (n - drop) * 8 * d / prims.nearest(prims.memcpy_bytes_per_s, d)


def predict(cell: Cell, prims: Primitives) -> dict[str, float]:
    """Cost model: per-client / server seconds, wall seconds, peak bytes, bytes up."""
    d, n, drop = cell.dim, cell.clients, cell.n_dropped
    mem = prims.nearest(prims.memcpy_bytes_per_s, d)
    vec = 8 * (d + 1)
    base_mem = N_DISTINCT_INPUTS * 8 * d + 4 * vec
    if cell.protocol == "plain":
        client = 2 * 8 * d / mem + 2e-5
        server = (n - drop) * 3 * vec / mem
        transport = 3 * (n - drop) * vec / mem
        peak = 2 * n * vec + base_mem
        up = vec + 120
    elif cell.protocol in ("secagg", "secagg+"):
        k = mask_degree(cell.protocol, n)
        h = k + 1
        split, combine = prims.shamir_costs(h)
        add = prims.add_s(d)
        python = 25e-6  # per neighbour: dict/field handling, HKDF context strings, ...
        client = (
            2 * prims.keygen_s
            + 2 * split
            + k * (2 * prims.agree_s + prims.seal_s + prims.open_s + python)
            + h * add
            + 6 * 8 * d / mem
        )
        server = n * (add + 2 * vec / mem + combine + k * python) + 3 * vec / mem
        if drop and not cell.dropped_in_sum:  # regenerate the dropped clients' pairwise masks
            server += drop * (combine + k * (prims.agree_s + add))
        transport = 3 * n * vec / mem + 6 * n * k * 10e-6
        peak = 2 * n * vec + base_mem + 6 * n * k * 400
        words = ring_bits(cell.protocol, n) // 8 * (d + 1)
        # sealed shares as packed rows; unmask shares as rows plus their owners' ids
        up = words + 2 * 32 + k * SEALED_BYTES + h * (SHARE_BYTES + 10) + 1200
    elif cell.protocol == "ckks":
        c = prims.ckks_chunk
        m = ckks_chunks(d)
        chunk_bytes = c.get("chunk_bytes", 33000.0)
        ct = m * (chunk_bytes + 30)
        client = m * (c.get("encrypt_s", 1e-3) + c.get("load_decrypt_s", 6e-4)) + 6 * 8 * d / mem
        server = n * m * (c.get("load_s", 3e-4) + c.get("add_s", 3e-5)) + m * c.get(
            "serialize_s", 3e-4
        )
        transport = 2 * n * 2 * ct / 2e9 + n * m * 5e-6
        setup = n * (c.get("context_load_s", 5e-3) + 2 * prims.agree_s) + 0.05
        transport += setup
        peak = 2 * n * ct + base_mem + n * 4 * c.get("secret_context_bytes", 3e5) + 3 * ct
        up = ct + 200
    else:
        raise ValueError(cell.protocol)
    wall = n * client + server + transport
    return {
        "client_seconds": client,
        "server_seconds": server,
        "wall_seconds": wall,
        "peak_bytes": peak,
        "client_bytes_up": up,
    }


class Corrections:
    """Measured / predicted ratios per protocol, applied from the nearest measured cell.

    Nearest = same protocol, minimising 2 |ln d - ln d'| + |ln n - ln n'| (the d-dependent
    terms dominate extrapolation), preferring cells whose predicted wall time is >= 0.2 s
    (smaller ones are mostly noise). Ratios are clamped to [0.5, 4].
    """

    KEYS = ("client", "server", "wall")

    def __init__(self) -> None:
        self.seen: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, cell: Cell, pred: dict[str, float], measured: dict[str, Any]) -> None:
        got = dict(measured)
        got["wall_seconds"] = measured["wall_seconds"] + measured.get("setup_seconds", 0.0)
        ratios = {
            key: got[f"{key}_seconds"] / pred[f"{key}_seconds"]
            for key in self.KEYS
            if pred[f"{key}_seconds"] > 0 and got.get(f"{key}_seconds")
        }
        self.seen[cell.protocol].append(
            {"n": cell.clients, "d": cell.dim, "big": pred["wall_seconds"] >= 0.2, **ratios}
        )

    def for_cell(self, cell: Cell) -> dict[str, Any]:
        seen = self.seen[cell.protocol]
        pool = [s for s in seen if s["big"]] or seen
        if not pool:
            return {"client": 1.0, "server": 1.0, "wall": 1.0, "from_cell": None}

        def distance(s: dict[str, Any]) -> tuple[float, int]:
            return (
                2 * abs(math.log(s["d"] / cell.dim)) + abs(math.log(s["n"] / cell.clients)),
                -s["n"],
            )

        near = [s for s in pool if distance(s)[0] == min(distance(x)[0] for x in pool)]
        out: dict[str, Any] = {
            key: min(4.0, max(0.5, statistics.median(s.get(key, 1.0) for s in near)))
            for key in self.KEYS
        }
        out["from_cell"] = f"n={near[0]['n']} d={near[0]['d']}"
        return out


def make_row(
    cell: Cell,
    prims: Primitives,
    measured: dict[str, Any] | None,
    skipped: str | None,
    prediction: dict[str, float],
    correction: dict[str, Any],
) -> dict[str, Any]:
    limit = limit_of(cell, prims)
    plain_bytes = 4 * cell.dim
    row: dict[str, Any] = {
        "protocol": cell.protocol,
        "threat_model": cell.threat_model,
        "clients": cell.clients,
        "dim": cell.dim,
        "n": cell.clients,  # the names issue 49's checks read
        "d": cell.dim,
        "dropout": cell.dropout,
        "dropped_clients": cell.n_dropped,
        "drop_phase": cell.phase if cell.n_dropped else None,
        "dropped_in_sum": cell.dropped_in_sum if cell.n_dropped else None,
        "client_seconds": None,
        "server_seconds": None,
        "client_bytes_up": None,
        "plain_bytes": plain_bytes,
        **limit,
        "server_limit_seconds": server_limit_of(cell, prims),
        "ratio_to_limit": None,
        "bytes_ratio": None,
        "target": None,
        "target_met": None,
        "skipped": skipped,
        "estimated": False,
    }
    if cell.protocol in ("secagg", "secagg+"):
        row["target"] = f"client_seconds <= {SECAGG_TARGET:g} x limit_seconds"
        row["mask_neighbours"] = mask_degree(cell.protocol, cell.clients)
        row["ring_bits"] = ring_bits(cell.protocol, cell.clients)
        row["value_bound"] = VALUE_BOUND
        row["bytes_target"] = SECAGG_BYTES_TARGET if cell.dim >= BYTES_TARGET_MIN_DIM else None
    elif cell.protocol == "ckks":
        row["target"] = f"client_bytes_up <= {CKKS_BYTES_TARGET:g} x plain_bytes"
        row["ckks_chunks"] = ckks_chunks(cell.dim)
        row["bytes_target"] = CKKS_BYTES_TARGET if cell.dim >= BYTES_TARGET_MIN_DIM else None
        if CKKS_PARAMS is not None:
            row["ckks_params"] = {
                "poly_modulus_degree": CKKS_PARAMS.poly_modulus_degree,
                "coeff_mod_bit_sizes": list(CKKS_PARAMS.coeff_mod_bit_sizes),
                "scale_bits": CKKS_PARAMS.scale_bits, "packing": CKKS_PARAMS.packing,
                "seeded": CKKS_PARAMS.seeded, "security_bits": 128,
            }  # fmt: skip
    scaled = {
        "client_seconds": prediction["client_seconds"] * correction["client"],
        "server_seconds": prediction["server_seconds"] * correction["server"],
        "wall_seconds": prediction["wall_seconds"] * correction["wall"],
        "peak_bytes": prediction["peak_bytes"],
        "client_bytes_up": prediction["client_bytes_up"],
        "model_correction": correction,
    }
    if measured is None:
        row["estimated"] = True
        est = dict(scaled)
        est["method"] = (
            "extrapolated by the cost model from this run's primitive measurements, times the "
            "measured/predicted ratios of the nearest measured cell of the same protocol "
            "(model_correction); NOT measured"
        )
        if row["limit_seconds"]:
            est["ratio_to_limit"] = est["client_seconds"] / row["limit_seconds"]
        est["bytes_ratio"] = est["client_bytes_up"] / plain_bytes
        row["estimate"] = est
    else:
        row.update(measured)
        row["predicted"] = scaled
        if row["limit_seconds"]:
            row["ratio_to_limit"] = row["client_seconds"] / row["limit_seconds"]
            row["ratio_to_limit_wall"] = row["client_wall_seconds"] / row["limit_seconds"]
        row["bytes_ratio"] = row["client_bytes_up"] / plain_bytes
        row["bytes_up"] = row["client_bytes_up"]
        if row.get("bytes_target") is not None:
            row["bytes_target_met"] = bool(row["bytes_ratio"] <= row["bytes_target"])
        if cell.protocol in ("secagg", "secagg+"):
            row["target_met"] = bool(row["ratio_to_limit"] <= SECAGG_TARGET)
        elif cell.protocol == "ckks":
            row["target_met"] = bool(row["bytes_ratio"] <= CKKS_BYTES_TARGET)
    return row
