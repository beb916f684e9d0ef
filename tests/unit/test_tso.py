import itertools
import threading

import pytest

from vectide.services.common import timestamp
from vectide.services.common.kv import MemoryKV
from vectide.services.common.tso import TSOAllocator, TSOError


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


def make(kv=None, clock=None, window_ms=3000):
    tso = TSOAllocator(kv or MemoryKV(), window_ms=window_ms, clock=clock or FakeClock(1_000_000))
    tso.initialize()
    return tso


def test_starts_at_clock_and_persists_window_before_serving():
    kv, clock = MemoryKV(), FakeClock(1_000_000)
    tso = make(kv, clock)
    assert kv.get("tso/bound") == b"1003000"
    assert timestamp.parse(tso.alloc()) == (1_000_000, 0)


def test_batch_returns_first_of_consecutive_stamps():
    tso = make()
    first = tso.alloc(10)
    assert tso.alloc() == first + 10


def test_logical_overflow_borrows_next_millisecond():
    tso = make()
    first = tso.alloc(timestamp.MAX_LOGICAL)
    second = tso.alloc(5)
    assert second > first
    assert timestamp.parse(second) == (1_000_001, 0)


def test_update_follows_clock_and_never_goes_back():
    clock = FakeClock(1_000_000)
    tso = make(clock=clock)
    a = tso.alloc()
    clock.now += 50
    tso.update()
    b = tso.alloc()
    assert timestamp.parse(b) == (1_000_050, 0)
    clock.now -= 10_000  # clock steps back
    tso.update()
    c = tso.alloc()
    assert a < b < c


def test_update_extends_the_bound_before_physical_reaches_it():
    kv, clock = MemoryKV(), FakeClock(1_000_000)
    tso = make(kv, clock, window_ms=100)
    for _ in range(10):
        clock.now += 60
        tso.update()
        assert int(kv.get("tso/bound")) > timestamp.physical_ms(tso.alloc())


def test_restart_starts_above_saved_bound_even_with_clock_set_back():
    kv = MemoryKV()
    first = make(kv, FakeClock(5_000_000))
    last_before = first.alloc(100) + 99
    restarted = make(kv, FakeClock(4_000_000))  # the clock is 1000 s behind now
    assert restarted.alloc() > last_before
    assert timestamp.physical_ms(restarted.alloc()) > 5_003_000


def test_a_second_allocator_fences_the_first():
    kv, clock = MemoryKV(), FakeClock(1_000_000)
    old = make(kv, clock, window_ms=100)
    make(kv, clock, window_ms=100)
    clock.now += 200
    with pytest.raises(TSOError, match="another TSO"):
        old.update()
    with pytest.raises(TSOError):
        old.alloc()


def test_uninitialised_allocator_refuses():
    with pytest.raises(TSOError, match="not initialised"):
        TSOAllocator(MemoryKV()).alloc()


def test_threads_get_unique_strictly_increasing_stamps():
    tso = TSOAllocator(MemoryKV())
    tso.initialize()
    results: list[list[int]] = [[] for _ in range(8)]

    def worker(out: list[int]) -> None:
        for _ in range(10_000):
            out.append(tso.alloc())

    threads = [threading.Thread(target=worker, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert all(a < b for a, b in itertools.pairwise(r))
    assert len({ts for r in results for ts in r}) == 80_000


@pytest.mark.parametrize("count", [0, (1 << 18) + 1])
def test_count_out_of_range(count):
    with pytest.raises(ValueError):
        make().alloc(count)


def test_a_fenced_allocator_hands_out_nothing_even_inside_its_window():
    """A coordinator that lost leadership fences its TSO: its stamps may already repeat."""
    tso = make()
    tso.alloc()
    tso.fence()
    with pytest.raises(TSOError):
        tso.alloc()
    with pytest.raises(TSOError):
        tso.update()
