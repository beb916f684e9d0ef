"""Proxy tasks and their three queues (Milvus's dd, dm and dq).

Every request becomes a task with the lifecycle pre_execute -> (stamp) -> execute ->
post_execute:

- dd (DDL) tasks run one at a time per proxy, each stamped when it starts, so one proxy's
  DDL reaches the rootcoord in stamp order;
- dm (insert, delete, upsert) tasks run concurrently; each is stamped through the
  ChannelsTimeTicker, which holds its channels back from the timeticks until its messages
  are acknowledged;
- dq (search, query) tasks run concurrently up to a bound.

pre_execute (validation, meta lookup, hashing) runs before the stamp, so a slow or invalid
request never holds a channel's timetick back.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from vectide.services.common.errors import Code, MilvusError
from vectide.services.proxy.channels_time_ticker import ChannelsTimeTicker

#: stamps one DDL task may take while other proxies' DDL keep overtaking it
DDL_ATTEMPTS = 5

Queue = Literal["dd", "dm", "dq"]


class Task(ABC):
    queue: ClassVar[Queue]
    ts: int = 0

    def pre_execute(self) -> None:  # noqa: B027 - optional step, most tasks override it
        """Validate and resolve everything that needs no stamp."""

    def channels(self) -> list[str]:
        """dm tasks: the pchannels this task writes."""
        return []

    @abstractmethod
    def execute(self) -> None: ...

    def post_execute(self) -> Any:
        """The task's result."""
        return None


class CallTask(Task):
    """A DDL step given as a function of the task's stamp."""

    queue: ClassVar[Queue] = "dd"

    def __init__(self, fn: Callable[[int], Any]) -> None:
        self._fn = fn
        self._result: Any = None

    def execute(self) -> None:
        self._result = self._fn(self.ts)

    def post_execute(self) -> Any:
        return self._result


class TaskScheduler:
    def __init__(
        self, alloc_ts: Callable[[], int], ticker: ChannelsTimeTicker, max_reads: int = 16
    ) -> None:
        self._alloc_ts = alloc_ts
        self._ticker = ticker
        self._dd_lock = threading.Lock()
        #: a token per read that may run at once: a read takes one and gives it back (a C
        #: queue: ``threading.BoundedSemaphore`` is Python code around a Condition, paid by
        #: every read)
        self._dq_slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(max_reads):
            self._dq_slots.put(None)

    def run(self, task: Task) -> Any:
        task.pre_execute()
        if task.queue == "dd":
            with self._dd_lock:
                self._run_ddl(task)
        elif task.queue == "dm":
            channels = task.channels()
            task.ts = self._ticker.stamp(channels)
            try:
                task.execute()
            finally:
                self._ticker.done(channels, task.ts)
        else:
            self._dq_slots.get()
            try:
                task.execute()
            finally:
                self._dq_slots.put(None)
        return task.post_execute()

    def _run_ddl(self, task: Task) -> None:
        """Stamp and run a DDL task; stamped again when another proxy's later-stamped DDL
        reached the rootcoord first (DDL_OUT_OF_ORDER: nothing was done, a fresh stamp
        orders it after that one), up to ``DDL_ATTEMPTS`` times."""
        for attempt in range(1, DDL_ATTEMPTS + 1):
            task.ts = self._alloc_ts()
            try:
                task.execute()
                return
            except MilvusError as exc:
                if exc.code != Code.DDL_OUT_OF_ORDER or attempt == DDL_ATTEMPTS:
                    raise
            finally:
                self._ticker.wake()  # a DDL message may wait for a tick to cover it

    def ddl(self, fn: Callable[[int], Any]) -> Any:
        return self.run(CallTask(fn))
