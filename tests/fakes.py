"""In-memory stand-ins for unit tests of pure logic (real services run in integration)."""

from __future__ import annotations

from vectide.services.testing import MemoryObjectStore

#: the object-store interface binlog readers and writers use, on a dict
DictStore = MemoryObjectStore
