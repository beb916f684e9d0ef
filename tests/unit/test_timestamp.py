import pytest

from vectide.services.common import timestamp


def test_compose_parse_round_trip():
    ts = timestamp.compose(1_700_000_000_123, 42)
    assert ts == (1_700_000_000_123 << 18) | 42
    assert timestamp.parse(ts) == (1_700_000_000_123, 42)
    assert timestamp.physical_ms(ts) == 1_700_000_000_123


def test_ordering_follows_physical_then_logical():
    assert timestamp.compose(10, timestamp.MAX_LOGICAL) < timestamp.compose(11, 0)


def test_add_physical_keeps_logical_and_clamps_at_zero():
    ts = timestamp.compose(5_000, 7)
    assert timestamp.parse(timestamp.add_physical_ms(ts, 250)) == (5_250, 7)
    assert timestamp.parse(timestamp.add_physical_ms(ts, -1_000)) == (4_000, 7)
    assert timestamp.parse(timestamp.add_physical_ms(ts, -10_000)) == (0, 7)


@pytest.mark.parametrize(("physical", "logical"), [(-1, 0), (0, -1), (0, 1 << 18)])
def test_out_of_range_parts_are_rejected(physical, logical):
    with pytest.raises(ValueError):
        timestamp.compose(physical, logical)


def test_unix_seconds_conversion():
    ts = timestamp.from_unix_seconds(1_700_000_000.5)
    assert timestamp.to_unix_seconds(ts) == pytest.approx(1_700_000_000.5)
