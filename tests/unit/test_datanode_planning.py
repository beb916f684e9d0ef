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


def batch_ends(p, channel, batches):
    """Plan and run ``batches`` batches; the end offset of each on ``channel``."""
    ends = []
    for _ in range(batches):
        end = p.plan()
        ends.append(end[channel])
        p.rebase(end)
    return ends


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
    assert batch_ends(p, "a", 3) == [100, 200, 251]


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


# -- with the tick index: the driver knows the ticks only -----------------------------------


def ticks_at(p, channel, offsets):
    """Index entries: a tick at each offset, stamped with its offset."""
    for offset in offsets:
        p.observe(channel, Seen(offset, 0, offset))


def test_index_ticks_cut_batches_after_a_tick_and_unknown_offsets_count_as_data():
    p, clock = planner(idle=5.0)
    p.rebase({"a": 0, "b": 0})
    ticks_at(p, "a", [9, 19])  # data records in between, never seen by the driver
    ticks_at(p, "b", [0, 1, 2])  # only ticks
    assert p.plan() == {"a": 20, "b": 3}  # data on a: a batch runs at once
    assert p.last_tick("a", 0, 20) is None  # unknown offsets: the executor reads them
    assert p.last_tick("b", 0, 3) == (3, 2)  # every offset a tick: no read
    p.rebase({"a": 20, "b": 3})
    ticks_at(p, "a", [20, 21])
    clock.now = 1.0
    assert p.plan() == {"a": 20, "b": 3}  # ticks only: wait for the idle period
    clock.now = 6.0
    assert p.plan() == {"a": 22, "b": 3}


def test_index_cap_falls_between_ticks_and_the_rest_follows():
    p, _ = planner(max_records=100)
    p.rebase({"a": 0, "b": 0})
    ticks_at(p, "a", [249])  # 249 records before the first tick the index names
    assert batch_ends(p, "a", 3) == [100, 200, 250]


def test_index_entries_below_the_start_or_out_of_order_are_ignored():
    p, _ = planner()
    p.rebase({"a": 50, "b": 0})
    ticks_at(p, "a", [10, 60, 55, 70])  # a stale entry, and one from a second rootcoord
    ticks_at(p, "unknown", [5])  # a channel this job does not read
    assert p.plan()["a"] == 71
    assert p.rebase({"a": 71, "b": 0}) == {}  # the index needs no seek


def test_a_restart_from_a_checkpoint_behind_the_index_cuts_at_the_first_known_tick():
    p, _ = planner(max_records=1000)
    p.rebase({"a": 0, "b": 0})
    ticks_at(p, "a", [500])
    assert p.rebase({"a": 300, "b": 0}) == {}  # Spark's start lies inside what is known
    assert p.plan()["a"] == 501
