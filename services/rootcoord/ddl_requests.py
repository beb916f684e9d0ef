"""DDL requests identified by their stamp, so a retried one is answered, not run again.

A proxy stamps each DDL before sending it (the stamp is unique: TSO). When the reply is
lost (the connection dropped, the deadline passed, the coordinator's answer never came
back) the proxy's RPC client sends the same request again with the same stamp: without
this log a create would answer "already exists" and a drop "not found" for a request that
succeeded, or DDL_OUT_OF_ORDER for its own first attempt. The log remembers the outcome of
recent stamps (a result, or an error the request itself caused) and replays it; a retry
arriving while the first attempt still runs waits for it.

Kept in memory by the active rootcoord: a retry that reaches a new leader after a failover
runs again (and may then get the error its first attempt's effect causes).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from vectide.services.common.errors import Code, MilvusError

#: errors that say nothing about the request: its retry must run it again
TRANSIENT = frozenset({Code.SERVICE_UNAVAILABLE, Code.SERVICE_NOT_READY, Code.DDL_OUT_OF_ORDER})

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class _Outcome:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: MilvusError | None = None


class RequestLog:
    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._outcomes: OrderedDict[int, _Outcome] = OrderedDict()

    def run(self, stamp: int, fn: Callable[[], Any]) -> Any:
        """``fn()``'s outcome for the request stamped ``stamp``, run at most once."""
        with self._lock:
            outcome = self._outcomes.get(stamp)
            first = outcome is None
            if first:
                outcome = self._outcomes[stamp] = _Outcome()
                while len(self._outcomes) > self._capacity:
                    self._outcomes.popitem(last=False)
        if not first:
            outcome.done.wait()
            if outcome.error is not None:
                raise outcome.error
            return outcome.result
        try:
            outcome.result = fn()
        except MilvusError as exc:
            if exc.code in TRANSIENT:
                self._forget(stamp)
            else:
                outcome.error = exc
            raise
        except BaseException:
            self._forget(stamp)
            raise
        finally:
            outcome.done.set()
        return outcome.result

    def _forget(self, stamp: int) -> None:
        """Let a retry of ``stamp`` run again; one waiting now gets a retriable error."""
        with self._lock:
            outcome = self._outcomes.pop(stamp, None)
        if outcome is not None and outcome.error is None:
            outcome.error = MilvusError(
                Code.SERVICE_UNAVAILABLE, f"the DDL stamped {stamp} failed; retry"
            )


def once_per_stamp(method: F) -> F:
    """A DDL method ``(self, ts, ...)`` of an object with a ``requests`` RequestLog."""

    @functools.wraps(method)
    def run_once(self: Any, ts: int, *args: Any, **kwargs: Any) -> Any:
        return self.requests.run(ts, lambda: method(self, ts, *args, **kwargs))

    return run_once  # type: ignore[return-value]
