"""Recipes: the modules a worker imports when it starts."""

from __future__ import annotations

import sys

from securefgl.federation.recipes import Recipe, builder_modules, import_builder_modules


def test_builder_modules_are_the_recipes_modules_once_each() -> None:
    recipes = [
        Recipe("securefgl.algorithms.fedavg.parties:build_client", {}),
        Recipe("securefgl.algorithms.fedavg.parties:build_server", {}),
        Recipe("protocols.plain:make", {}),
    ]
    assert builder_modules(recipes) == ["protocols.plain", "securefgl.algorithms.fedavg.parties"]


def test_a_module_that_does_not_import_is_left_for_build_to_report() -> None:
    sys.modules.pop("colorsys", None)
    import_builder_modules(["no_such_module_for_securefgl", "colorsys"])
    assert "colorsys" in sys.modules
