"""FedStruct's settings travel to a party's process as JSON (a recipe argument)."""

import math

from securefgl.algorithms.fedstruct.settings import EdgeDP, FedStructSettings


def test_settings_survive_json_with_tuples_edge_dp_and_infinity():
    st = FedStructSettings(
        structure_hops=3, structure_beta=(0.2, 0.3, 0.5), feature_hidden=(4, 5),
        edge_dp="lapgraph", edge_epsilon=2.0, abar_max_round_gib=math.inf,
    )  # fmt: skip
    assert FedStructSettings.from_json(st.to_json()) == st
    assert st.edge_privacy == EdgeDP("lapgraph", 2.0)
    assert FedStructSettings.from_json(FedStructSettings().to_json()) == FedStructSettings()
