"""Optional extras: packages that only some features need, imported where they are used.

``pip install 'securefgl[ray]'`` brings Ray (``--executor ray``), ``securefgl[plots]``
matplotlib (the audit's and the benchmarks' figures); ``make install`` installs both. No
module of ``securefgl``, ``protocols`` or ``attacks`` imports them when it is imported: a
feature that needs one calls :func:`require` (or :func:`check` to fail early without
importing it), which raises :class:`MissingExtraError` naming the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from securefgl.config.fields import ConfigError

EXTRAS = {"ray": ("ray", "Ray"), "plots": ("matplotlib", "matplotlib")}
"""Each optional extra: (the module it provides, the name people know it by)."""


class MissingExtraError(ConfigError, ImportError):
    """A feature needs an optional extra that is not installed. A :class:`ConfigError` (the
    command line prints it as one line, exit status 2) and an :class:`ImportError`."""

    def __init__(self, extra: str, purpose: str) -> None:
        module, known_as = EXTRAS[extra]
        ConfigError.__init__(
            self,
            f"{purpose} needs {known_as}, which is not installed (an optional extra): "
            f"pip install 'securefgl[{extra}]'",
        )
        self.name = module
        self.extra = extra


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent missing, or a module set to None
        return False


def check(extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtraError` if ``extra`` is not installed (without importing it:
    cheap, for checks before a long run starts)."""
    if not _installed(EXTRAS[extra][0]):
        raise MissingExtraError(extra, purpose)


def require(extra: str, purpose: str, module: str | None = None) -> ModuleType:
    """``module`` (default: the extra's top-level module) imported, or
    :class:`MissingExtraError` naming the extra; ``purpose`` says what needs it."""
    name = module or EXTRAS[extra][0]
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] != EXTRAS[extra][0]:
            raise  # the extra is there but something it imports is not: not ours to hide
        raise MissingExtraError(extra, purpose) from None


def pyplot(purpose: str) -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (the ``plots`` extra)."""
    require("plots", purpose).use("Agg")
    return require("plots", purpose, "matplotlib.pyplot")
