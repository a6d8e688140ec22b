"""Where a configuration key belongs: unknown or misplaced keys refused with the table
that holds them or the closest key (``nsf`` under ``[experiment.fedstruct]``)."""

from __future__ import annotations

import difflib
from typing import Any

from protocols.settings import ProtocolSettings
from securefgl.config.families import sections
from securefgl.config.fields import ConfigError, did_you_mean, public_fields


def _tables() -> list[tuple[str, list[str]]]:
    """Every settings table (``protocol`` and each section) with its keys."""
    kinds = [("protocol", ProtocolSettings)] + [(n, s.settings) for n, s in sections().items()]
    return [(name, [f.name for f in public_fields(kind)]) for name, kind in kinds]


def _where(key: str, tables: list[tuple[str, list[str]]], here: str | None = None) -> str:
    """``; 'nsf' belongs under [experiment.fedstruct]`` or ``(did you mean 'nsf_dim' under
    [experiment.fedstruct]?)`` for a key that is not where it was given; ``""`` if none."""
    home = next((n for n, keys in tables if key in keys and n != here), None)
    if home is not None:
        return f"; {key!r} belongs under [experiment.{home}]"
    owner = {k: n for n, keys in reversed(tables) if n != here for k in keys}
    close = difflib.get_close_matches(key, list(owner), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r} under [experiment.{owner[close[0]]}]?)" if close else ""


def refuse_unknown(values: dict[str, Any], known: list[str]) -> None:
    """Refuse unknown keys, naming the section a key belongs to, or the closest key (among
    the generic keys first, then every section's)."""
    unknown = sorted(set(values) - set(known))
    if not unknown:
        return
    tables = _tables()
    homed = {k for _, keys in tables for k in keys}  # a key of a section: name its section
    notes = [_where(key, tables) if key in homed else did_you_mean(key, known)
             or _where(key, tables) for key in unknown]  # fmt: skip
    raise ConfigError(f"unknown config keys {unknown}{''.join(notes)}; known keys: {sorted(known)}")


def refuse_misplaced(name: str, table: dict[str, Any], generic: list[str]) -> None:
    """Refuse a key of section ``name``'s table that belongs to another table (``dp_noise``
    under ``[experiment.fedstruct]``, or a ``generic`` key of ``[experiment]``) or is a
    misspelling of one."""
    tables = _tables()
    keys = dict(tables).get(name, [])
    for key in sorted(set(table) - set(keys)):
        if did_you_mean(key, keys):
            continue  # the section's own check suggests its closest key
        note = _where(key, tables, here=name) or _where(key, [("", generic)], here=name)
        if note:
            note = note.replace("[experiment.]", "[experiment]")
            raise ConfigError(f"unknown [{name}] keys [{key!r}]{note}; known keys: {sorted(keys)}")
