"""The grid: datasets, hop-sum variants, and how a cell (row) is identified and named."""

from __future__ import annotations

DATASETS = ("cora", "chameleon", "photo", "csbm100k")
VARIANTS = (  # (mode, support, pruned), in the order they run within a (dataset, K, L_s)
    ("plain", None, False),
    ("plain", None, True),
    ("masked", "union", True),
    ("masked", "union", False),
    ("masked", "rows", False),
    ("masked", "rows", True),
    ("ckks", "union", True),
    ("ckks", "union", False),
    ("ckks", "rows", False),
    ("ckks", "rows", True),
)


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with every cell that ``new`` also has replaced (same grid order), except that
    a cell skipped now never replaces one measured before."""

    fresh = {cell_key(r): r for r in new}
    for r in old:
        if not r["skipped"] and fresh.get(cell_key(r), r)["skipped"]:
            del fresh[cell_key(r)]
    merged = [fresh.pop(cell_key(r), r) for r in old]
    return merged + list(fresh.values())


def cell_key(r: dict) -> tuple:
    """What identifies a cell of the grid (rows with equal keys measure the same thing)."""
    return (
        *(r[k] for k in ("dataset", "clients", "hops", "mode", "support", "pruned")),
        r.get("collusion_threshold"),
        r.get("ring_bits"),
        receiver_masks_only(r),
    )


def receiver_masks_only(row: dict) -> bool:
    """A masked cell without pairwise masks (rows from before the option lack the key)."""
    return row.get("pair_masks") is False


def label(row: dict) -> str:
    sup = f"/{row['support']}" if row["support"] else ""
    sup += f"/t{row['collusion_threshold']}" if row.get("collusion_threshold") else ""
    sup += f"/z{row['ring_bits']}" if row.get("ring_bits") else ""
    sup += "/rx" if receiver_masks_only(row) else ""
    pr = "/p" if row["pruned"] else ""
    return f"{row['dataset']} K={row['clients']} L={row['hops']} {row['mode']}{sup}{pr}"


def variant(row: dict) -> str:
    """``mode[-support][-t<threshold>][-z32][-rx][ (pruned)]``; ``-tN``: masks tolerate N
    colluders; ``-z32``: masked in Z_2^32 instead of Z_2^64; ``-rx``: receiver masks only."""
    sup = f"-{row['support']}" if row["support"] else ""
    sup += f"-t{row['collusion_threshold']}" if row.get("collusion_threshold") else ""
    sup += f"-z{row['ring_bits']}" if row.get("ring_bits") else ""
    sup += "-rx" if receiver_masks_only(row) else ""
    return f"{row['mode']}{sup}{' (pruned)' if row['pruned'] else ''}"
