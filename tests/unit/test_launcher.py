"""The launcher. A role process loads only what every role needs before its role starts (a
restart is quicker without the proxy's pymilvus and pandas), yet every RPC type a reply may
carry (an ingest worker once failed to decode CollectionInfo after the proxy's import went);
a data node whose streaming query died exits, so that it is restarted."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import vectide.services.launcher
from vectide.services.common.rpc import codec
print(sorted(m for m in ("pymilvus", "pandas", "faiss", "pyspark") if m in sys.modules))
print(all(t in codec._TYPES for t in ("CollectionInfo", "DataType", "SegmentInfo")))
"""


def test_the_launcher_defers_role_modules_but_registers_every_rpc_type():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split("\n")
    assert out[0] == "[]", f"heavy modules loaded before any role starts: {out[0]}"
    assert out[1] == "True"


class _Query:
    def __init__(self, error: Exception | None) -> None:
        self._error = error

    def awaitTermination(self) -> None:
        if self._error is not None:
            raise self._error


def test_a_data_node_whose_streaming_query_died_exits_to_be_restarted(monkeypatch):
    import threading

    from vectide.services import launcher

    exits: list[int] = []
    monkeypatch.setattr(launcher.os, "_exit", exits.append)
    launcher._exit_when_query_ends(_Query(RuntimeError("Python worker failed")), threading.Event())
    assert exits == [4]
    stopping = threading.Event()
    stopping.set()  # `vectide down`: the query was stopped on purpose
    launcher._exit_when_query_ends(_Query(None), stopping)
    assert exits == [4]
