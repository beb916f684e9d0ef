"""What a role process loads before its role starts: only what every role needs (a restart
is quicker without the proxy's pymilvus and pandas), yet every RPC type a reply may carry
(an ingest worker once failed to decode CollectionInfo after the proxy's import went)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import services.launcher
from services.common.rpc import codec
print(sorted(m for m in ("pymilvus", "pandas", "faiss", "pyspark") if m in sys.modules))
print(all(t in codec._TYPES for t in ("CollectionInfo", "DataType", "SegmentInfo")))
"""


def test_the_launcher_defers_role_modules_but_registers_every_rpc_type():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split("\n")
    assert out[0] == "[]", f"heavy modules loaded before any role starts: {out[0]}"
    assert out[1] == "True"
