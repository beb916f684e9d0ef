"""What a query node's stores hold in memory, counted from the arrays themselves, and giving
freed memory back to the operating system.

tracemalloc does not see numpy's or faiss's buffers, and RSS does not say what holds it:
this module counts the bytes of every column and faiss index (their ``nbytes`` and vector
sizes), so the count can be compared with the process's RSS. The rest of RSS is the
interpreter, libraries, allocator slack and transient buffers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections import Counter

import faiss

log = logging.getLogger(__name__)


def faiss_bytes(index: faiss.Index) -> int:
    """Bytes an index's arrays hold (vectors, graph links, inverted lists, id maps)."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexHNSW):
        hnsw = index.hnsw
        links = hnsw.neighbors.size() * 4 + hnsw.levels.size() * 4 + hnsw.offsets.size() * 8
        return links + faiss_bytes(index.storage)
    if isinstance(index, faiss.IndexIVF):
        lists = index.invlists
        entries = sum(lists.list_size(i) for i in range(index.nlist))
        direct = index.direct_map.array.size() * 8
        return entries * (index.code_size + 8) + direct + faiss_bytes(index.quantizer)
    if isinstance(index, faiss.IndexFlatCodes):
        return index.codes.size()
    return index.ntotal * index.d * 4  # an estimate for kinds this module does not know


def add_bytes(total: Counter[str], other: dict[str, int], prefix: str = "") -> None:
    for kind, nbytes in other.items():
        total[prefix + kind] += nbytes


_libc: ctypes.CDLL | None = None


def release_freed() -> None:
    """Give memory freed by big drops (a handoff, a released segment) back to the system:
    glibc keeps freed heap pages of small and medium blocks in its arenas (``malloc_trim``
    returns them), and pyarrow's pool keeps the buffers of binlogs read."""
    global _libc
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except Exception:
        log.debug("pyarrow pool not released", exc_info=True)
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass
