"""In-memory stand-ins for unit tests of pure logic (real services run in integration)."""

from __future__ import annotations


class DictStore:
    """The object-store interface binlog readers and writers use, on a dict.

    ``fail_index_puts`` makes that many writes of index files fail (S3 outage drills).
    """

    def __init__(self, fail_index_puts: int = 0) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail_index_puts = fail_index_puts

    def put(self, key: str, data: bytes) -> None:
        if key.startswith("index_files/") and self.fail_index_puts:
            self.fail_index_puts -= 1
            raise OSError("S3 is down")
        self.objects[key] = data

    def get(self, key: str) -> bytes:
        return self.objects[key]

    def list(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix))

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list(prefix)
        for key in keys:
            del self.objects[key]
        return len(keys)
