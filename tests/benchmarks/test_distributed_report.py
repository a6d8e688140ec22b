"""The distributed benchmark's report: Ray's wall time without its start-up."""

from benchmarks.distributed import driver_traffic, startup_table


def row(executor: str, wall: float, **extra: float) -> dict:
    return {"workload": "w", "executor": executor, "threads": 1, "wall_seconds": wall, **extra}


def test_ratio_excludes_ray_startup_only() -> None:
    lines = startup_table(
        [row("local", 10.0), row("ray", 20.0, ray_startup_seconds=8.0, wall_s_excluding_setup=12.0)]
    )
    assert lines[-1] == "| w | 10.0 | 20.0 | 8.0 | 12.0 | 1.20× |"  # measured before imports
    lines = startup_table([row("local", 10.0), row("ray", 20.0, ray_startup_seconds=8.0,
                                                    ray_import_seconds=3.0,
                                                    wall_s_excluding_setup=12.0)])  # fmt: skip
    assert lines[-1] == "| w | 10.0 | 20.0 | 8.0 (3.0) | 12.0 | 1.20× |"


def test_no_table_without_a_measured_startup_or_local_row() -> None:
    assert startup_table([row("local", 10.0), row("ray", 20.0)]) == []
    assert startup_table([row("ray", 20.0, ray_startup_seconds=8.0)]) == []


class FakeRay:
    driver_fetched_bytes, driver_put_bytes = 5, 7
    driver_call_bytes, driver_result_bytes = 11, 13
    startup_seconds, import_seconds = 3.0, 1.0


def test_driver_traffic_sums_payload_bytes_and_subtracts_startup() -> None:
    out = driver_traffic([FakeRay(), FakeRay()], wall=10.0)
    assert out["driver_payload_bytes"] == 24
    assert out["wall_s_excluding_setup"] == 4.0
    assert out["ray_import_seconds"] == 2.0
    assert driver_traffic([object()], wall=10.0) == {"wall_s_excluding_setup": 10.0}
