"""MetaKV: the small key-value contract every core persists its state through.

Keys are ``/``-separated relative paths (``tso/bound``, ``meta/collections/42``). The cores
depend only on this Protocol, so they run against :class:`MemoryKV` in unit tests and against
ZooKeeper in a deployment without a line changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class KVError(RuntimeError):
    """The metastore could not complete an operation (connection lost, bad key)."""


@dataclass
class Txn:
    """An all-or-nothing batch: every check must hold, then every put and delete applies.

    ``checks`` maps a key to the value it must have now (``None``: the key must not exist).
    """

    checks: dict[str, bytes | None] = field(default_factory=dict)
    puts: dict[str, bytes] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)


@runtime_checkable
class MetaKV(Protocol):
    def get(self, key: str) -> bytes | None:
        """The value under ``key``, or None when it does not exist."""

    def put(self, key: str, value: bytes) -> None:
        """Create or overwrite ``key``."""

    def delete(self, key: str) -> None:
        """Remove ``key`` and everything below it; absent keys are fine."""

    def compare_and_set(self, key: str, expected: bytes | None, value: bytes) -> bool:
        """Set ``key`` to ``value`` only if it currently holds ``expected`` (None: absent)."""

    def commit(self, txn: Txn) -> bool:
        """Apply ``txn`` atomically; False (and nothing applied) when a check fails."""

    def list_prefix(self, prefix: str) -> dict[str, bytes]:
        """Every key strictly below the path ``prefix`` that holds a value, with its value."""


def validate_key(key: str) -> str:
    parts = key.split("/")
    if not key or any(part in {"", ".", ".."} for part in parts):
        raise KVError(f"invalid metastore key {key!r}")
    return key
