"""Primary key -> shard: deterministic and documented, so any writer (a proxy, or a Kafka
producer writing channels directly) puts a key on the same shard.

- int64 keys: MurmurHash3 x86_32 (seed 0) of the key's 8 little-endian bytes, as Milvus's
  ``Hash32Int64``;
- varchar keys: CRC-32 (IEEE) of the UTF-8 bytes, as Milvus's ``HashString2Uint32``;
- shard = hash % shards_num.
"""

from __future__ import annotations

import zlib

import numpy as np

_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_M32 = np.uint64(0xFFFFFFFF)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


def _mix_block(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = (k * _C1) & _M32
    k = _rotl(k, 15)
    k = (k * _C2) & _M32
    h = h ^ k
    h = _rotl(h, 13)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32


def murmur3_int64(keys: np.ndarray) -> np.ndarray:
    """MurmurHash3 x86_32, seed 0, of each int64's little-endian bytes (vectorised)."""
    u = np.asarray(keys, dtype="<i8").view("<u8").astype(np.uint64)
    h = np.zeros(len(u), dtype=np.uint64)
    h = _mix_block(h, u & _M32)
    h = _mix_block(h, u >> np.uint64(32))
    h ^= np.uint64(8)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def shard_of(pks: np.ndarray | list[str], shards_num: int) -> np.ndarray:
    if isinstance(pks, np.ndarray):
        hashes = murmur3_int64(pks)
    else:
        hashes = np.fromiter((zlib.crc32(k.encode()) for k in pks), dtype=np.uint32, count=len(pks))
    return (hashes % np.uint32(shards_num)).astype(np.int64)
