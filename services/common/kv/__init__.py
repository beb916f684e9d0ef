"""The metastore interface (MetaKV) and its implementations: memory and ZooKeeper."""

from services.common.kv.base import KVError, MetaKV, Txn
from services.common.kv.memory import MemoryKV

__all__ = ["KVError", "MemoryKV", "MetaKV", "Txn"]
