"""In-process MetaKV for unit tests and single-process experiments."""

from __future__ import annotations

import threading

from vectide.services.common.kv.base import Txn, validate_key


class MemoryKV:
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._data.get(validate_key(key))

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[validate_key(key)] = bytes(value)

    def delete(self, key: str) -> None:
        validate_key(key)
        with self._lock:
            for existing in [k for k in self._data if k == key or k.startswith(key + "/")]:
                del self._data[existing]

    def compare_and_set(self, key: str, expected: bytes | None, value: bytes) -> bool:
        return self.commit(Txn(checks={key: expected}, puts={key: value}))

    def commit(self, txn: Txn) -> bool:
        with self._lock:
            if any(self._data.get(validate_key(k)) != v for k, v in txn.checks.items()):
                return False
            for key, value in txn.puts.items():
                self._data[validate_key(key)] = bytes(value)
            for key in txn.deletes:
                for existing in [k for k in self._data if k == key or k.startswith(key + "/")]:
                    del self._data[existing]
            return True

    def list_prefix(self, prefix: str) -> dict[str, bytes]:
        base = validate_key(prefix) + "/"
        with self._lock:
            return {k: v for k, v in sorted(self._data.items()) if k.startswith(base)}
