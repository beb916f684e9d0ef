"""Tells the data node's source when a flush waits, so it runs a batch at once.

An idle data node moves its checkpoints only every few seconds (no Spark job per trigger for
ticks alone). A Flush, though, waits for the checkpoints to pass its segments' seal stamp.
Datacoord writes the newest seal stamp to ``datacoord/seal_ts``; this watch (in the data node
process, on the driver) copies it into a small file the source's ``latestOffset`` reads on
every trigger (the source runs in a Python process Spark starts, with no ZooKeeper of its
own). A ZooKeeper watch costs nothing while nothing is sealed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: the key, under the cluster root, datacoord writes on every seal
SEAL_TS_KEY = "datacoord/seal_ts"


class FlushWake:
    def __init__(self, zk: Any, cluster_root: str, wake_file: Path) -> None:
        self._zk = zk
        self._path = f"{cluster_root.rstrip('/')}/{SEAL_TS_KEY}"
        self.wake_file = wake_file

    def start(self) -> FlushWake:
        from kazoo.recipe.watchers import DataWatch

        self.wake_file.parent.mkdir(parents=True, exist_ok=True)
        self._zk.ensure_path(self._path)
        DataWatch(self._zk, self._path, self._changed)
        return self

    def _changed(self, data: bytes | None, _stat: Any) -> None:
        write_atomically(self.wake_file, (data or b"0").decode() or "0")


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
