"""Background work runs at a lower CPU priority than serving.

Where roles share cores (standalone, ``vectide up``, a small node), a search or an insert
call waits while a sealed segment's index build holds them on every core; that work loses
nothing by running a little later, a user's call does. RocksDB lowers its compaction
threads for the same reason. The settings are ``service.background_nice`` (index builds)
and ``data.nice`` (the data node process, not lowered by default: config.py says why).

Linux shares CPU by nice value among the threads of one scheduling *autogroup* (a session:
every role process here starts its own) and among autogroups by the group's nice
(``/proc/<pid>/autogroup``), so a background process lowers both, a background thread its
own. Raising a nice value needs no privilege; where it cannot be set (another OS, a
read-only ``/proc``) the work runs at normal priority. On Kubernetes each role has its own
CPU requests, and the process's nice only orders its own threads.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")


def lower_thread(nice: int) -> bool:
    """The calling thread's nice becomes at least ``nice``; threads it starts afterwards
    (faiss's OpenMP workers, spawned by the thread that first runs a parallel region)
    inherit it. On Linux a thread id is a ``PRIO_PROCESS`` target of its own."""
    if nice <= 0:
        return False
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        return True
    except (OSError, AttributeError) as exc:  # AttributeError: no get/setpriority here
        log.debug("thread priority not lowered", extra={"error": str(exc)})
        return False


def lower_process(nice: int, autogroup: Path = AUTOGROUP) -> bool:
    """This process, from its main thread before it starts others (threads and child
    processes inherit the value), and its scheduling group where the kernel has them."""
    if not lower_thread(nice):
        return False
    try:
        autogroup.write_text(str(nice))
    except OSError as exc:  # no autogroups (kernel option off) or /proc read-only
        log.debug("autogroup nice not set", extra={"error": str(exc)})
    return True
