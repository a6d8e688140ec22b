"""Configuration errors are caught before any work, with a message naming the problem."""

import pytest

from securefgl.algorithms.registry import check_config, cross_edge_mode
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.experiment import run_experiment


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dataset": "NoSuchGraph"}, "unknown dataset"),
        ({"algorithms": ["fedavg", "magic"]}, "unknown algorithm 'magic'"),
        ({"partition": "spectral"}, "unknown partition"),
        ({"partition_cut": 1.0}, "partition_cut"),
        ({"partition_cut": 0.0}, "partition_cut"),
        ({"model": "gat9"}, "unknown model"),
        ({"cross_edges": "leaky"}, "unknown cross_edges"),
        ({"train_fraction": 0.5, "val_fraction": 0.3, "test_fraction": 0.3}, "sum to 1.100"),
        ({"train_fraction": -0.1}, r"\[0, 1\]"),
        ({"label_rate": 0.95}, "leave no test nodes"),
        ({"seeds": [0, 2**32]}, r"in \[0, 2\*\*32\)"),
        ({"label_rate": 0.2, "train_fraction": 0.5}, "drop train_fraction, or label_rate"),
        ({"clients": 0}, "clients must be"),
        ({"rounds": 0}, "rounds must be"),
        ({"client_fraction": 0.0}, "client_fraction"),
        ({"dropout": 1.0}, "dropout"),
        ({"lr": 0.0}, "lr"),
        ({"seeds": []}, "seed"),
        ({"server_optimizer": "lamb"}, "server_optimizer"),
        ({"lr": float("inf")}, "lr must be a finite number"),
        ({"mu": float("inf")}, "mu must be a finite number"),
        ({"seeds": [-1]}, "seeds must be distinct integers in"),
        ({"seeds": [0, 0]}, "seeds must be distinct"),
        ({"algorithms": ["fedavg", "fedavg"]}, "each at most once"),
        ({"task": "graph", "dataset": "MUTAG", "hidden": 8}, r"hidden does not apply to task "
         r"'graph'; use \[experiment.graph\] hidden \(--graph-hidden\)"),
        ({"task": "graph", "dataset": "MUTAG", "partition": "metis"}, "partition does not apply"),
        ({"task": "graph", "dataset": "MUTAG", "lr": 0.5}, "lr does not apply"),
        ({"task": "graph", "dataset": "MUTAG", "csbm": {"num_nodes": 50}}, "csbm does not"),
        ({"fedstruct": {"abar_degree_bound": 0}}, "abar_degree_bound must be"),
        ({"task": "graph", "dataset": "MUTAG", "gpfl": {"sparsity": -1.0}}, "sparsity must"),
        ({"task": "graph", "dataset": "MUTAG", "graph": {"gcfl_eps1": -1.0}}, "gcfl_eps1 must"),
    ],
)
def test_invalid_configs_are_rejected(changes, message):
    with pytest.raises(ConfigError, match=message):
        check_config(ExperimentConfig(**changes))


def test_no_algorithms_means_the_task_s_defaults():
    assert ExperimentConfig(algorithms=[]).algorithms == ["fedavg", "local", "central"]
    assert ExperimentConfig(task="graph", dataset="NCI1").algorithms == ["self-train", "fedavg"]


def test_more_clients_than_nodes_is_rejected():
    cfg = ExperimentConfig(csbm={"num_nodes": 50}, clients=51, rounds=1)
    with pytest.raises(ConfigError, match="exceeds the 50 nodes"):
        run_experiment(cfg, progress=False)


def test_label_rate_sets_the_split():
    cfg = ExperimentConfig(label_rate=0.05, val_fraction=0.1).validate()
    assert cfg.split == pytest.approx((0.05, 0.1, 0.85))


def test_toml_round_trip_and_unknown_keys(tmp_path):
    good = tmp_path / "exp.toml"
    good.write_text('[experiment]\ndataset = "Cora"\nclients = 5\nalgorithms = ["fedavg"]\n')
    cfg = check_config(ExperimentConfig.from_toml(good))
    assert (cfg.dataset, cfg.clients, cfg.algorithms) == ("Cora", 5, ["fedavg"])
    bad = tmp_path / "bad.toml"
    bad.write_text("clients = 5\nnum_clientz = 3\n")
    with pytest.raises(ConfigError, match="num_clientz"):
        ExperimentConfig.from_toml(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("clients = = 5")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ExperimentConfig.from_toml(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        ExperimentConfig.from_toml(tmp_path / "missing.toml")


def test_the_sum_mode_has_one_name_and_cross_edges_follow_the_algorithms(tmp_path):
    from securefgl.cli import build_parser, config_from_args

    parser, _ = build_parser()
    args = parser.parse_args(
        ["run", "--algorithms", "fedstruct", "--sum-mode", "masked", "--nsf", "hop2vec"]
    )
    cfg = check_config(config_from_args(args))
    assert (cfg.fedstruct.sum_mode, cross_edge_mode(cfg)) == ("masked", "known")
    toml = tmp_path / "fs.toml"
    toml.write_text(
        'algorithms = ["fedstruct"]\n[fedstruct]\nnsf = "hop2vec"\nsum_mode = "ckks"\n'
    )
    assert ExperimentConfig.from_toml(toml).fedstruct.sum_mode == "ckks"
    assert cross_edge_mode(ExperimentConfig(algorithms=["fedavg"])) == "hidden"
    explicit = ExperimentConfig(
        algorithms=["fedstruct"], fedstruct={"nsf": "hop2vec"}, cross_edges="hidden"
    )
    with pytest.raises(ConfigError, match="needs cross_edges"):
        check_config(explicit)


def test_section_keys_at_the_top_level_name_their_section(tmp_path):
    flat = tmp_path / "flat.toml"
    flat.write_text('algorithms = ["fedstruct"]\nnsf = "hop2vec"\n')
    with pytest.raises(ConfigError, match=r"'nsf' belongs under \[experiment.fedstruct\]"):
        ExperimentConfig.from_toml(flat)
    with pytest.raises(ConfigError, match="unknown \\[fedgcn\\] keys"):
        ExperimentConfig.from_dict({"fedgcn": {"hopz": 1}})
    # a section's key close to a generic one is still sent to its section
    for key, value in (("threat_model", "malicious"), ("stack", ["secagg"])):
        with pytest.raises(ConfigError, match=rf"'{key}' belongs under \[experiment.protocol\]"):
            ExperimentConfig(**{key: value})


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"fedstruct": {"nsf": "node2vec"}}, "unknown nsf"),
        ({"fedstruct": {"sum_mode": "ckks", "abar_ring_bits": 32}}, "apply to sum_mode='masked'"),
        ({"fedstruct": {"abar_max_round_gib": 0}}, "abar_max_round_gib"),
        ({"fedstruct": {"edge_dp": "edgerand"}}, "edge_epsilon"),
        ({"fedgcn": {"hops": 3}}, "hops must be 1 or 2"),
    ],
)
def test_bad_section_values_are_refused_when_the_config_is_built(section, message):
    with pytest.raises(ConfigError, match=message):
        ExperimentConfig(**section)


def test_a_field_at_its_default_is_no_trouble_for_another_task():
    node = ExperimentConfig(hidden=8)
    graph = ExperimentConfig(task="graph", dataset="MUTAG", rounds=3, local_epochs=2, mu=0.1)
    assert node.hidden == 8 and graph.replace(rounds=4).rounds == 4  # replace keeps defaults


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algorithms": ["fedavg", "fedego"], "client_fraction": 0.5}, "fedego trains every"),
        ({"algorithms": ["spreadfgl"], "client_fraction": 0.5}, "spreadfgl trains every"),
        ({"algorithms": ["fedproto"], "client_fraction": 0.5}, "fedproto trains every"),
        ({"algorithms": ["fed-pub"], "protocol": ["secagg", "clip_noise"]},
         r"in \[experiment.fedpub\]"),
        ({"algorithms": ["fedpub-fedavg"], "fedpub": {"sums": "masked"}}, "FED-PUB's"),
        ({"task": "graph", "dataset": "MUTAG", "algorithms": ["gpfl"],
          "protocol": ["clip_noise"]}, r"in \[experiment.gpfl\]"),
        ({"task": "graph", "dataset": "MUTAG", "algorithms": ["fedvn"], "client_fraction": 0.6},
         "fedvn trains every"),
        ({"algorithms": ["spreadfgl"], "clients": 4, "edge_servers": 2,
          "protocol": {"stack": ["secagg"], "min_cohort": 3}}, "the smallest with 2 clients"),
        ({"algorithms": ["spreadfgl"], "clients": 4, "edge_servers": 2, "protocol": ["ckks"]},
         "edge servers cannot exchange it"),
    ],
)
def test_what_a_method_cannot_honour_is_refused_before_any_work(changes, message):
    with pytest.raises(ConfigError, match=message):
        check_config(ExperimentConfig(**changes))


def test_a_section_no_chosen_algorithm_reads_is_named(caplog):
    from securefgl.algorithms.registry import unread_sections

    config = ExperimentConfig(algorithms=["fedavg", "fedgl"], spreadfgl={"h_mechanism": "gaussian"},
                              fedego={"dp_noise": 2.0})  # fmt: skip
    assert unread_sections(config) == {"fedego": ["fedego", "fedego-fedavg", "fedego-fedprox",
                                                  "fedego-local"]}  # fmt: skip
    with caplog.at_level("WARNING"):
        check_config(config)
    assert "[experiment.fedego] is set but only fedego" in caplog.text
    graph = ExperimentConfig(task="graph", dataset="MUTAG", algorithms=["gpfl"],
                             graph={"hidden": 16})  # fmt: skip
    assert unread_sections(graph) == {}  # the graph toolkit's section: every graph algorithm


@pytest.mark.parametrize(
    ("algorithms", "graph", "named"),
    [
        (["fedavg"], {"ditto_lambda": 0.1}, {"[experiment.graph] ditto_lambda": ("ditto",)}),
        (["ditto"], {"ditto_lambda": 0.1}, {}),
        (["fedavg", "gcfl"], {"gcfl_eps1": 0.2, "fedstar_rw": 8},
         {"[experiment.graph] fedstar_rw": ("fedstar",)}),
        (["fedavg"], {"hidden": 16}, {}),  # every graph algorithm reads it
    ],
)
def test_a_field_only_unchosen_algorithms_read_is_named(caplog, algorithms, graph, named):
    from securefgl.algorithms.registry import unread_section_fields

    config = ExperimentConfig(task="graph", dataset="MUTAG", algorithms=algorithms, graph=graph)
    assert unread_section_fields(config) == named
    with caplog.at_level("WARNING"):
        check_config(config)
    for key, readers in named.items():
        assert f"{key} is set but only {readers[0]} read it" in caplog.text


def test_a_generic_field_a_chosen_algorithm_does_not_read_is_named(caplog):
    config = ExperimentConfig(algorithms=["fedavg", "fedego", "fedstruct"], hidden=8)
    with caplog.at_level("WARNING"):
        check_config(config)
    assert "fedego does not read hidden: see --fedego-hidden" in caplog.text
    assert "fedstruct does not read hidden" in caplog.text
    assert "fedavg does not read" not in caplog.text


def test_edge_servers_without_an_algorithm_that_runs_them_is_named(caplog):
    with caplog.at_level("WARNING"):
        check_config(ExperimentConfig(algorithms=["fedavg", "fedgl"], clients=4, edge_servers=2))
    assert "only spreadfgl run several edge servers" in caplog.text


def test_the_recommendation_task_is_sent_to_its_own_runner():
    with pytest.raises(ConfigError, match="securefgl recommend"):
        check_config(ExperimentConfig(task="recommendation", dataset="FilmTrust"))


def test_a_new_stack_as_a_list_resets_the_settings_it_would_not_read():
    dp = ExperimentConfig(protocol={"stack": ["secagg", "clip_noise"], "dp_noise": 0.5,
                                    "min_cohort": 3})  # fmt: skip
    secagg = dp.replace(protocol=["secagg"])
    assert secagg.protocol.dp_noise == 1.0 and secagg.protocol.min_cohort == 3
    assert secagg.protocol.ignored_settings() == []
    assert dp.replace(protocol={"stack": ["secagg"]}).protocol.dp_noise == 0.5  # a table: as given


def test_ray_settings_are_checked_before_any_work(caplog):
    with pytest.raises(ConfigError, match="finite number of seconds"):
        ExperimentConfig(party_timeout=float("inf"))
    with pytest.raises(ConfigError, match="no Ray cluster answers there"):
        check_config(ExperimentConfig(executor="ray", ray_address="127.0.0.1:1"))
    with caplog.at_level("WARNING"):
        check_config(ExperimentConfig(workers=7, ray_co_host=True))
    assert "workers, ray_co_host have no effect without --executor ray" in caplog.text


def test_secure_evaluation_does_not_apply_to_recommendation():
    with pytest.raises(ConfigError, match="secure_evaluation does not apply"):
        ExperimentConfig(task="recommendation", dataset="FilmTrust", secure_evaluation=True)


def test_poisson_sampling_with_central_noise_over_secagg_is_refused():
    """A round too few joined is emptied: one client's coin decides whether the others'
    updates are released, which the subsampled Gaussian charged does not cover."""
    with pytest.raises(ConfigError, match="Poisson sampling with central noise"):
        ExperimentConfig(clients=20, client_fraction=0.5, client_sampling="poisson",
                         protocol={"stack": ["secagg", "clip_noise"], "dp_mode": "central"})


@pytest.mark.parametrize("colluding", [9, 6, 5])
def test_colluders_holding_every_share_of_the_smallest_sum_are_refused(colluding):
    """10 clients, malicious server: the smallest sum it can open holds 6 (Shamir's t), so
    6 colluders know every noise share of it (ε = ∞) and 5 leave one unknown."""
    from securefgl.experiment.runner import load_graph, run_single

    cfg = ExperimentConfig(csbm={"num_nodes": 200}, clients=10, rounds=1,
                           protocol={"stack": ["secagg", "clip_noise"], "threat_model":
                                     "malicious", "dp_colluding_clients": colluding})
    if colluding >= 6:
        with pytest.raises(ConfigError, match="known noise shares reach the 6 clients"):
            run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
    else:
        result = run_single(cfg, "fedavg", 0, load_graph(cfg), progress=False)
        assert 0 < result.privacy["epsilon"] < float("inf")


@pytest.mark.parametrize(
    ("changes", "warned"),
    [
        ({"dataset": "Cora", "csbm": {"num_nodes": 500}}, "csbm has no effect: Cora"),
        ({"dataset": "c-sbm", "csbm": {"num_nodes": 500}}, None),
        ({"task": "graph", "dataset": "MUTAG", "algorithms": ["fedavg"],
          "graph": {"motif": {"seed": 5}}}, "[experiment.graph] motif has no effect: MUTAG"),
        ({"task": "graph", "dataset": "motif-basis", "clients": 5, "algorithms": ["fedavg"],
          "graph": {"synthetic": {"num_graphs": 50}}}, "synthetic has no effect: motif-basis"),
        ({"task": "graph", "dataset": "motif-basis", "clients": 5, "algorithms": ["fedavg"],
          "graph": {"motif": {"seed": 5}}}, None),
    ],
)
def test_generator_options_for_another_dataset_are_named(caplog, changes, warned):
    with caplog.at_level("WARNING"):
        check_config(ExperimentConfig(**changes))
    if warned:
        assert warned in caplog.text
    else:
        assert "has no effect" not in caplog.text
