"""What a newcomer reads: short, grouped help with the valid names, examples, --version and
"did you mean" on a misspelt flag or algorithm."""

from __future__ import annotations

import pytest

from securefgl.cli import main
from securefgl.config.families import algorithm_names
from securefgl.config.flags import config_from_args


def _help(capsys, *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_run_help_is_short_and_lists_algorithms_protocols_and_examples(capsys):
    out = _help(capsys, "run")
    assert len(out.splitlines()) < 300  # it was 658 lines; 230 before three families came
    for name in (*algorithm_names("node"), *algorithm_names("graph")):
        assert name in out
    for name in ("secagg+", "ckks", "clip_noise", "ldp_laplace", "ldp_gaussian"):
        assert name in out
    assert "examples:" in out and "securefgl run --dataset Cora" in out
    assert "--help-all" in out
    # a family section lists its flags by name; --help-all explains them
    fedstruct = out.split("FedStruct (")[1].split("\n\n")[0]
    assert "--sum-mode" in fedstruct and "{plain,masked,ckks}" not in fedstruct
    assert "(default: fedavg,local,central; --task graph: self-train,fedavg)" in " ".join(
        out.split()
    )


def test_help_all_explains_every_family_flag(capsys):
    assert main(["run", "--help-all"]) == 0
    out = capsys.readouterr().out
    assert "--sum-mode {plain,masked,ckks}" in out and "--fedgcn-hops N" in out
    assert "--preset" in out and "Table 5" in out


def test_recommend_help_shows_its_section_and_defaults(capsys):
    out = " ".join(_help(capsys, "recommend").split())
    assert "--algorithms NAME,..." in out and "(default: fesog)" in out
    assert "--time-budget X seconds a run may train" in out and "(default: 2000)" in out
    assert "--quiet" in out and "--log-file FILE" in out and "--no-progress" in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("securefgl ")


def test_a_misspelt_flag_gets_the_closest_one(capsys):
    assert main(["run", "--clinets", "3"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --clinets 3 (did you mean '--clients'?)" in err
    assert err.startswith("securefgl: usage error: securefgl run:")
    assert main(["recommend", "--users-per-rnd", "3"]) == 2
    assert "(did you mean '--users-per-round'?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["run", "--algorithms", "fedavgg"], "(did you mean 'fedavg'?)"),
        (["run", "--algorithms", "gpfl"], "(it is a graph-task algorithm: --task graph)"),
        (["run", "--task", "graph", "--dataset", "MUTAG", "--algorithms", "fedstruct"],
         "(it is a node-task algorithm: --task node)"),
        (["recommend", "--algorithms", "gpfl"],
         "(it is a graph-task algorithm: `securefgl run --task graph`)"),
        (["recommend", "--algorithms", "fedavg"], "(it is a node-task algorithm: `securefgl run`)"),
    ],
)  # fmt: skip
def test_an_unknown_algorithm_is_a_configuration_error_with_a_hint(argv, expect, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "configuration error: unknown algorithm" in err and expect in err


def test_flags_still_build_the_configuration():
    from securefgl.cli import build_parser

    parser, _ = build_parser()
    args = parser.parse_args(["run", "--clients", "4", "--sum-mode", "masked", "--preset"])
    config = config_from_args(args)
    assert config.clients == 4 and config.fedstruct.sum_mode == "masked"
