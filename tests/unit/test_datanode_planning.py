"""The data node driver's batch planning (no Spark, no Kafka): caps, idle batches, flush."""

from vectide.streaming.planning import OffsetPlanner, PlanLimits, Seen


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def planner(max_records=2000, max_bytes=1 << 30, idle=5.0):
    clock = Clock()
    return OffsetPlanner(["a", "b"], PlanLimits(max_records, max_bytes, idle), clock), clock


def feed(p, channel, start, kinds):
    """kinds: 'd' data record, 't' tick (stamped with its offset)."""
    for i, kind in enumerate(kinds):
        p.observe(channel, Seen(start + i, 100, start + i if kind == "t" else None))


def test_a_batch_covers_everything_seen_and_starts_where_the_last_ended():
    p, _ = planner()
    assert p.rebase({"a": 0, "b": 0}) == {}
    feed(p, "a", 0, "ddtd")
    feed(p, "b", 0, "tt")
    end = p.plan()
    assert end == {"a": 4, "b": 2}
    assert p.rebase(end) == {}  # the scanner continues, no seek
    feed(p, "a", 4, "d")
    assert p.plan() == {"a": 5, "b": 2}


def test_a_channel_with_more_records_than_the_cap_between_ticks_advances():
    p, _ = planner(max_records=100)
    p.rebase({"a": 0, "b": 0})
    feed(p, "a", 0, "d" * 250 + "t")  # no tick in the first 250 records
    ends = []
    for _ in range(3):
        end = p.plan()
        ends.append(end["a"])
        p.rebase(end)
    assert ends == [100, 200, 251]


def test_bytes_cap_the_batch_but_one_record_always_passes():
    p, _ = planner(max_bytes=250)
    p.rebase({"a": 0, "b": 0})
    p.observe("a", Seen(0, 1000))
    p.observe("a", Seen(1, 10))
    assert p.plan()["a"] == 1
    p.rebase({"a": 1, "b": 0})
    assert p.plan()["a"] == 2


def test_only_ticks_advance_every_idle_period_not_every_trigger():
    p, clock = planner(idle=5.0)
    p.rebase({"a": 0, "b": 0})
    feed(p, "a", 0, "t")
    assert p.plan() == {"a": 1, "b": 0}  # the first advance is at once
    p.rebase({"a": 1, "b": 0})
    clock.now = 1.0
    feed(p, "a", 1, "tt")
    assert p.plan() == {"a": 1, "b": 0}  # ticks only: no batch yet
    clock.now = 6.0
    assert p.plan() == {"a": 3, "b": 0}


def test_a_waiting_flush_runs_a_batch_for_new_ticks_at_once():
    p, clock = planner(idle=5.0)
    p.rebase({"a": 0, "b": 0})
    feed(p, "a", 0, "t")
    p.plan()
    p.rebase({"a": 1, "b": 0})
    clock.now = 1.0
    feed(p, "a", 1, "tt")  # ticks stamped 1 and 2
    assert p.plan(flush_wanted_ts=2) == {"a": 3, "b": 0}
    p.rebase({"a": 3, "b": 0})
    feed(p, "a", 3, "t")
    assert p.plan(flush_wanted_ts=2) == {"a": 3, "b": 0}  # the flush is served already


def test_a_start_the_scanner_never_read_from_makes_it_seek():
    p, _ = planner()
    p.rebase({"a": 0, "b": 0})
    feed(p, "a", 0, "ddd")
    assert p.rebase({"a": 10, "b": 0}) == {"a": 10}  # e.g. a checkpoint from a past run
    assert p.plan() == {"a": 10, "b": 0}


def test_a_range_read_by_the_driver_and_holding_only_ticks_needs_no_read():
    p, clock = planner(idle=5.0)
    p.rebase({"a": 0, "b": 0})
    feed(p, "a", 0, "ttt")
    feed(p, "b", 0, "tdt")
    clock.now = 10.0
    end = p.plan()
    assert end == {"a": 3, "b": 3}
    assert p.last_tick("a", 0, 3) == (3, 2)  # after the tick at offset 2, its stamp
    assert p.last_tick("a", 0, 2) == (2, 1)
    assert p.last_tick("b", 0, 3) is None  # data in the range: the executor reads it
    assert p.last_tick("a", 1, 3) is None  # not the start the driver read from
    assert p.last_tick("a", 0, 4) is None  # beyond what the driver read
    assert p.last_tick("a", 3, 3) is None  # empty
    assert p.last_tick("unknown", 0, 3) is None
