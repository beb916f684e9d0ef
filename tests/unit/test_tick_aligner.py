import numpy as np
import pytest

from vectide.services.common.msgstream.message import DeleteMsg, Position, TimeTickMsg
from vectide.services.common.msgstream.tick_aligner import PendingFences, TickAligner


def dm(ts: int, msg_id: int | None = None) -> DeleteMsg:
    return DeleteMsg(
        msg_id if msg_id is not None else ts, ts, 0, 1, -1, "s", np.array([ts]), np.array([ts])
    )


def tick(ts: int) -> TimeTickMsg:
    return TimeTickMsg(0, ts, 0)


def ts_of(pack) -> list[int]:
    return sorted(m.ts for m in pack.msgs)


def test_single_channel_out_of_order_released_on_tick():
    al = TickAligner(["a"])
    assert al.feed("a", 0, dm(9)) == []
    assert al.feed("a", 1, dm(7)) == []
    [pack] = al.feed("a", 2, tick(10))
    assert (pack.begin_ts, pack.end_ts, ts_of(pack)) == (0, 10, [7, 9])
    assert pack.end_positions == {"a": Position("a", 3, 10)}


def test_messages_above_the_tick_wait_for_a_later_pack():
    # Channel b's tick lags, so the common end is 5; a's message at 8 waits.
    al = TickAligner(["a", "b"])
    al.feed("a", 0, dm(3))
    al.feed("a", 1, dm(8))
    assert al.feed("a", 2, tick(10)) == []
    [pack] = al.feed("b", 0, tick(5))
    assert (pack.end_ts, ts_of(pack)) == (5, [3])
    # a's resume point stays before its tick 10: the message at 8 is not yet delivered.
    assert pack.end_positions["a"] == Position("a", 0, 5)
    assert pack.end_positions["b"] == Position("b", 1, 5)
    [pack2] = al.feed("b", 1, tick(10))
    assert (pack2.begin_ts, pack2.end_ts, ts_of(pack2)) == (5, 10, [8])
    assert pack2.end_positions["a"] == Position("a", 3, 10)


def test_a_message_before_a_lower_tick_keeps_the_resume_point_before_it():
    al = TickAligner(["a"])
    al.feed("a", 0, dm(12))  # stamped after the tick's minimum was taken, written first
    [pack] = al.feed("a", 1, tick(10))
    assert pack.msgs == [] and pack.end_positions["a"] == Position("a", 0, 10)
    resumed = TickAligner(["a"], pack.end_positions)
    resumed.feed("a", 0, dm(12))
    resumed.feed("a", 1, tick(10))
    [again] = resumed.feed("a", 2, tick(15))
    assert ts_of(again) == [12] and again.end_positions["a"] == Position("a", 3, 15)


def test_idle_ticks_release_empty_packs_and_stale_ticks_nothing():
    al = TickAligner(["a"])
    [p1] = al.feed("a", 0, tick(4))
    assert p1.msgs == [] and p1.end_ts == 4
    assert al.feed("a", 1, tick(4)) == []
    assert al.feed("a", 2, tick(3)) == []


def test_resume_skips_what_was_delivered():
    start = {"a": Position("a", 5, 10)}
    al = TickAligner(["a"], start)
    assert al.released_ts == 10
    al.feed("a", 5, dm(9))  # delivered before the restart
    al.feed("a", 6, dm(12))
    [pack] = al.feed("a", 7, tick(15))
    assert (pack.begin_ts, ts_of(pack)) == (10, [12])


def test_every_message_delivered_exactly_once_across_random_interleavings():
    rng = np.random.default_rng(7)
    channels = ["a", "b", "c"]
    logs: dict[str, list] = {c: [] for c in channels}
    next_ts, msg_id = 1, 0
    for tick_ts in range(50, 2000, 50):
        window: dict[str, list] = {c: [] for c in channels}
        for _ in range(rng.integers(0, 6)):
            ts = int(rng.integers(next_ts, tick_ts + 1))
            window[channels[rng.integers(0, 3)]].append(dm(ts, msg_id))
            msg_id += 1
        for c in channels:
            rng.shuffle(window[c])  # log order != timestamp order within a tick window
            logs[c] += [*window[c], tick(tick_ts)]
        next_ts = tick_ts + 1
    al = TickAligner(channels)
    cursors = dict.fromkeys(channels, 0)
    delivered: list[int] = []
    while any(cursors[c] < len(logs[c]) for c in channels):
        c = channels[rng.integers(0, 3)]
        if cursors[c] < len(logs[c]):
            for pack in al.feed(c, cursors[c], logs[c][cursors[c]]):
                assert all(pack.begin_ts < m.ts <= pack.end_ts for m in pack.msgs)
                delivered += [m.msg_id for m in pack.msgs]
            cursors[c] += 1
    assert sorted(delivered) == list(range(msg_id))


def test_needs_a_channel():
    with pytest.raises(ValueError):
        TickAligner([])


def protocol_logs(rng, channels, windows=40):
    """Random channel logs that keep the tick promise (after TimeTick(T), only ts > T) while
    breaking timestamp order: within a window and, sometimes, across the tick before it."""
    logs: dict[str, list] = {c: [] for c in channels}
    prev_tick, msg_id = 0, 0
    for tick_ts in range(50, 50 * (windows + 1), 50):
        for c in channels:
            window = []
            for _ in range(rng.integers(0, 5)):
                window.append(dm(int(rng.integers(prev_tick + 1, tick_ts + 1)), msg_id))
                msg_id += 1
            rng.shuffle(window)
            early = [m for m in window if rng.random() < 0.3 and logs[c]]
            late = [m for m in window if m not in early]
            if early:  # written before the previous tick: allowed, its ts is above it
                logs[c][-1:-1] = early
            logs[c] += [*late, tick(tick_ts)]
        prev_tick = tick_ts
    return logs, msg_id


def replay(aligner, logs, start_offsets, rng):
    cursors = dict(start_offsets)
    packs = []
    while any(cursors[c] < len(logs[c]) for c in logs):
        c = list(logs)[rng.integers(0, len(logs))]
        if cursors[c] < len(logs[c]):
            packs += aligner.feed(c, cursors[c], logs[c][cursors[c]])
            cursors[c] += 1
    return packs


def test_resume_from_any_pack_redelivers_exactly_the_rest():
    rng = np.random.default_rng(11)
    channels = ["a", "b", "c"]
    logs, total = protocol_logs(rng, channels)
    packs = replay(TickAligner(channels), logs, dict.fromkeys(channels, 0), rng)
    first_pass = [m.msg_id for p in packs for m in p.msgs]
    assert sorted(first_pass) == list(range(total))
    for pack in packs[::3]:
        before = {m.msg_id for p in packs if p.end_ts <= pack.end_ts for m in p.msgs}
        resumed = TickAligner(channels, pack.end_positions)
        offsets = {c: pos.offset for c, pos in pack.end_positions.items()}
        again = [m.msg_id for p in replay(resumed, logs, offsets, rng) for m in p.msgs]
        assert sorted(again) == sorted(set(range(total)) - before)


def test_a_fence_releases_what_it_covers_once_the_channel_was_read_up_to_it():
    # every message stamped <= 10 lies below offset 3: the fence acts as a tick at offset 2
    al = TickAligner(["a"])
    fences = PendingFences()
    fences.add(Position("a", 3, 10))
    al.feed("a", 0, dm(9))
    assert fences.due({"a": 1}) == []  # not read up to it yet
    al.feed("a", 1, dm(7))
    al.feed("a", 2, dm(12))  # stamped after the read: above the fence, written before it
    [due] = fences.due({"a": 3})
    [pack] = al.fence(due)
    assert (pack.end_ts, ts_of(pack)) == (10, [7, 9])
    assert pack.end_positions["a"] == Position("a", 2, 10)  # before the undelivered 12
    assert not fences and fences.due({"a": 3}) == []
    [later] = al.feed("a", 3, tick(15))
    assert ts_of(later) == [12]


def test_a_fence_below_a_tick_already_seen_releases_nothing():
    al = TickAligner(["a"])
    al.feed("a", 0, dm(5))
    [pack] = al.feed("a", 1, tick(20))
    assert ts_of(pack) == [5]
    assert al.fence(Position("a", 1, 10)) == []
