"""A bulk import job as it crosses roles: the proxy that runs it records it with datacoord
(in the metastore), so any proxy answers GetImportState and the REST job routes for it.
The running itself lives in ``services/proxy/imports.py``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PENDING = "Pending"
IMPORTING = "Importing"
COMPLETED = "Completed"
FAILED = "Failed"
#: states a job leaves only by running to its end
RUNNING = frozenset({PENDING, IMPORTING})


@dataclass
class ImportJob:
    job_id: int
    collection_id: int
    collection_name: str
    db_name: str
    partition_name: str
    files: list[str]
    #: the proxy (session id) running it
    proxy_id: int
    state: str = PENDING
    #: rows in the files (known once every file was read and checked)
    total_rows: int = 0
    #: rows inserted so far
    imported_rows: int = 0
    #: bytes of the files
    file_bytes: int = 0
    #: why it failed, and whether rows it had inserted were deleted again
    reason: str = ""
    cleaned: bool = False
    #: epoch seconds
    created_at: float = 0.0
    finished_at: float = 0.0
    #: per file: rows read (each file of a NumPy set: the set's)
    file_rows: list[int] = field(default_factory=list)
    #: the request's options (CSV ``sep``, ``nullkey``)
    options: dict[str, str] = field(default_factory=dict)

    @property
    def progress(self) -> int:
        """Percent: reading and checking the files is the first half, inserting the second."""
        if self.state == COMPLETED:
            return 100
        if not self.total_rows:
            return 0
        return min(99, 50 + 50 * self.imported_rows // self.total_rows)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ImportJob:
        return cls(**json.loads(raw))
