"""The metastore interface (MetaKV) and its implementations: memory and ZooKeeper."""

from vectide.services.common.kv.base import KVError, MetaKV, Txn
from vectide.services.common.kv.memory import MemoryKV

__all__ = ["KVError", "MemoryKV", "MetaKV", "Txn"]
