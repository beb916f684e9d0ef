import threading

import pytest

from vectide.services.common.id_allocator import IDAllocator
from vectide.services.common.kv import MemoryKV


def test_ids_are_unique_across_allocators_sharing_a_store():
    kv = MemoryKV()
    a, b = IDAllocator(kv, block=7), IDAllocator(kv, block=5)
    ids = [a.alloc_one() for _ in range(20)] + [b.alloc_one() for _ in range(20)]
    ids += [i for _ in range(5) for i in range(*a.alloc(9))]
    assert len(ids) == len(set(ids))
    assert min(ids) >= 1


def test_large_request_spans_one_reservation():
    kv = MemoryKV()
    first, end = IDAllocator(kv, block=10).alloc(1000)
    assert end - first == 1000
    assert int(kv.get("id/bound")) >= end


def test_restart_never_reuses_ids():
    kv = MemoryKV()
    before = {IDAllocator(kv).alloc_one() for _ in range(3)}
    after = IDAllocator(kv).alloc_one()
    assert after not in before and after > max(before)


def test_concurrent_allocation_is_unique():
    kv = MemoryKV()
    allocators = [IDAllocator(kv, block=50) for _ in range(4)]
    out: list[int] = []
    lock = threading.Lock()

    def worker(alloc: IDAllocator) -> None:
        got = [alloc.alloc_one() for _ in range(2000)]
        with lock:
            out.extend(got)

    threads = [threading.Thread(target=worker, args=(a,)) for a in allocators]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == len(set(out)) == 8000


def test_count_must_be_positive():
    with pytest.raises(ValueError):
        IDAllocator(MemoryKV()).alloc(0)
