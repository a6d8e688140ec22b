"""The ``patcher`` and ``hparams`` cells change exactly one setting on top of ``mean-ce``."""

import dataclasses

import pytest

from benchmarks.reproduce_spreadfgl.grid import (
    HPARAM_VARIANTS,
    PATCHER_VARIANTS,
    Cell,
    make_config,
    plan,
    table1_cut,
)


def _changed(a, b) -> dict:
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return {k: db[k] for k in da if da[k] != db[k]}


def test_each_variant_differs_from_mean_ce_in_its_own_setting_only():
    base = make_config(Cell("mean-ce", "CiteSeer", 6, "fedgl"), 3703)
    assert base.spreadfgl.loss_reduction == "mean"
    for variant, change in PATCHER_VARIANTS.items():
        cfg = make_config(Cell("patcher", "CiteSeer", 6, "fedgl", variant), 3703)
        assert _changed(base.spreadfgl, cfg.spreadfgl) == change
        assert cfg.replace(spreadfgl=base.spreadfgl, name=base.name) == base


def test_each_hparams_variant_differs_from_mean_ce_in_its_own_value_only():
    base = make_config(Cell("mean-ce", "CiteSeer", 9, "fedgl"), 3703)
    for variant, change in HPARAM_VARIANTS.items():
        cfg = make_config(Cell("hparams", "CiteSeer", 9, "fedgl", variant), 3703)
        assert _changed(base.spreadfgl, cfg.spreadfgl) == change.get("spreadfgl", {})
        assert cfg.hidden == change.get("hidden", base.hidden)
        assert cfg.replace(spreadfgl=base.spreadfgl, hidden=base.hidden, name=base.name) == base
    assert make_config(Cell("hparams", "Cora", 6, "fedgl", "K1"), 1433).spreadfgl.interval == 1


def test_hparams_run_fedavg_fusion_only_where_its_classifier_changes():
    cells = plan(["hparams"], ["CiteSeer"], [6, 9], ["fedgl"])
    assert {c.protection for c in cells if c.method == "fedavg-fusion"} == {"tl20", "h16"}
    assert {c.protection for c in cells if c.method == "fedgl"} == set(HPARAM_VARIANTS)
    assert len(cells) == 2 * (len(HPARAM_VARIANTS) + 2)


def test_fedavg_fusion_runs_only_the_variant_that_changes_its_model():
    cells = plan(["patcher"], ["CiteSeer"], [6], ["fedgl"])
    assert {c.protection for c in cells if c.method == "fedavg-fusion"} == {"sage"}
    assert {c.protection for c in cells if c.method == "fedgl"} == set(PATCHER_VARIANTS)


def test_variants_narrow_the_patcher_cells_and_unknown_ones_are_refused():
    cells = plan(["patcher"], ["Cora"], [12], ["fedgl"], ["own-client", "zero-rows"])
    assert sorted(c.protection for c in cells) == ["own-client", "zero-rows"]
    with pytest.raises(ValueError, match="own_client"):
        plan(["patcher"], ["Cora"], [12], ["fedgl"], ["own_client"])
    both = plan(["patcher", "hparams"], ["Cora"], [12], ["fedgl"], ["k3", "k10"])
    assert sorted((c.setting, c.protection) for c in both) == [
        ("hparams", "k10"),
        ("patcher", "k3"),
    ]
    with pytest.raises(ValueError, match="k10"):  # an hparams variant without its setting
        plan(["patcher"], ["Cora"], [12], ["fedgl"], ["k10"])
    with pytest.raises(ValueError, match="only the patcher and hparams"):
        plan(["table2"], ["Cora"], [12], ["fedgl"], ["k3"])


def test_f1_clients_cells_run_table2_s_configuration_unchanged():
    for meth in ("fedavg-fusion", "fedgl", "spreadfgl"):
        t2 = make_config(Cell("table2", "CS", 9, meth), 6805)
        f1 = make_config(Cell("f1-clients", "CS", 9, meth), 6805)
        assert f1.replace(name=t2.name) == t2


def test_table1_cut_cells_are_table2_s_on_cs_with_table_i_s_cut():
    cells = plan(["table1-cut"], ["Cora", "CS"], [6, 15], ["fedavg-fusion", "fedgl", "spreadfgl"])
    assert {c.dataset for c in cells} == {"CS"} and len(cells) == 6
    assert table1_cut("CS", 6) == 36405 / 81894 and table1_cut("CS", 15) == 52699 / 81894
    for meth in ("fedavg-fusion", "fedgl", "spreadfgl"):
        t2 = make_config(Cell("table2", "CS", 12, meth), 6805)
        cut = make_config(Cell("table1-cut", "CS", 12, meth), 6805)
        assert t2.partition_cut is None and cut.partition_cut == 52203 / 81894
        assert cut.replace(partition_cut=None, name=t2.name) == t2
