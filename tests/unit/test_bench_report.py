"""``make bench``'s target table: each ratio is to the run's fastest no-op measurement (the
verdict), with the ratios to the no-op measurements taken beside Vectide's shown next to it."""

from __future__ import annotations

from benchmarks import report


def results() -> dict:
    probe = {"insert_numpy_rows_per_s": 80_000.0, "search": {"qps": 1_000.0}}
    return {
        "systems": {
            "ceiling": {"concurrent": {"qps": 2_000.0}},
            "vectide": {
                "ceiling_probe": probe,
                "concurrent": {"qps": 1_190.0, "rounds": [1_190.0, 1_100.0, 900.0]},
                "ceiling_concurrent": {"qps": 1_800.0, "rounds": [1_700.0, 1_800.0, 1_500.0]},
            },
        }
    }


def target(name: str) -> dict:
    [found] = [t for t in report.evaluate_targets(results()) if t["target"].startswith(name)]
    return found


def test_the_verdict_takes_the_fastest_no_op_rate_and_the_windows_beside_are_kept():
    clients = target("8 concurrent clients")
    assert clients["measured"] == 1_190.0 / 2_000.0 and clients["met"] is False
    assert clients["beside"] == [1_190.0 / 1_700.0, 1_100.0 / 1_800.0, 900.0 / 1_500.0]


def test_the_table_shows_a_near_miss_unrounded_beside_the_windows():
    row = next(
        line
        for line in report.targets_table({"targets": [target("8 concurrent")]}).splitlines()
        if "8 concurrent" in line
    )
    assert "59.5% (70%, 61%, 60% of the no-op windows beside) | missed" in row


def test_targets_without_a_measurement_beside_show_none():
    assert "beside" not in target("idle deployment")
    assert "beside" not in target("insert >= 70%")  # no Vectide insert rate in this run
