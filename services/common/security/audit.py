"""The audit log: one structured line per DDL or permission change (who, what, when).

A dedicated logger, ``vectide.audit``, at INFO whatever the process's level, so the trail is
kept while the rest of the log stays quiet; ``security.audit_log_file`` sends it to a file
of its own instead. Lines are the process's ``key=value`` format (services/common/logs.py):
``ts=... logger=vectide.audit msg=CreateCollection user=alice db=default object=docs
outcome=ok``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vectide.services.common.logs import KeyValueFormatter

AUDIT = logging.getLogger("vectide.audit")
AUDIT.setLevel(logging.INFO)

#: who made a call when authentication is off (Milvus has no user then either)
ANONYMOUS = "anonymous"


def record(user: str, action: str, outcome: str = "ok", **fields: str) -> None:
    """Log that ``user`` did ``action`` (an RPC name) with ``outcome`` (``ok``, ``denied``
    or the error), and the objects it touched as ``fields``."""
    level = logging.INFO if outcome == "ok" else logging.WARNING
    AUDIT.log(level, action, extra={"user": user or ANONYMOUS, "outcome": outcome, **fields})


def log_to_file(path: str) -> Callable[[], None]:
    """Send the audit log to ``path`` only (appending); returns how to undo it."""
    handler = logging.FileHandler(path)
    handler.setFormatter(KeyValueFormatter())
    AUDIT.addHandler(handler)
    AUDIT.propagate = False

    def undo() -> None:
        AUDIT.removeHandler(handler)
        AUDIT.propagate = True
        handler.close()

    return undo
