"""The proxy's resource limits and per-user rate limits (``quota`` config section).

Pure: the tasks call the checks, the gRPC servicer charges the rate limiter. Limits fail with
PARAMETER_INVALID naming the config key, as Milvus's proxy names ``quotaAndLimits`` keys;
an exhausted rate fails with Milvus's RATE_LIMIT (code 8), which pymilvus retries with
back-off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from vectide.services.common import errors
from vectide.services.common.config import QuotaConfig
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.expr import Expr, ExprError, parse

#: kinds of request the rate limiter meters, and what one unit is
DML, SEARCH, QUERY = "dml", "search", "query"


def check_search(quota: QuotaConfig, nq: int, topk: int) -> None:
    """nq and limit + offset within ``quota.max_nq`` and ``quota.max_topk``."""
    if not 1 <= nq <= quota.max_nq:
        raise errors.invalid(f"nq must be in [1, {quota.max_nq}] (quota.max_nq), got {nq}")
    if not 1 <= topk <= quota.max_topk:
        raise errors.invalid(
            f"limit + offset must be in [1, {quota.max_topk}] (quota.max_topk), got {topk}"
        )


def check_dim(quota: QuotaConfig, field: str, dim: int) -> None:
    if not 1 <= dim <= quota.max_dim:
        raise MilvusError(
            Code.COLLECTION_ILLEGAL_SCHEMA,
            f"vector field {field} needs a dim in [1, {quota.max_dim}] (quota.max_dim), got {dim}",
        )


def check_collection_count(quota: QuotaConfig, existing: int) -> None:
    if existing >= quota.max_collections:
        raise MilvusError(
            Code.COLLECTION_NUM_LIMIT_EXCEEDED,
            f"exceeded the limit number of collections[limit={quota.max_collections}] "
            "(quota.max_collections)",
        )


def parse_filter(
    quota: QuotaConfig, text: str, params: dict[str, object] | None, zone: str = "UTC"
) -> Expr:
    """Parse a filter within ``quota.max_expr_length`` and ``quota.max_expr_depth``.

    Brackets are counted before parsing: the parser recurses per bracket level, so an
    expression nested thousands deep would exhaust the stack before its tree could be
    measured. The tree's depth is checked after (a long arithmetic chain nests too), because
    the query nodes' evaluator recurses over it.
    """
    if len(text) > quota.max_expr_length:
        raise errors.invalid(
            f"expression of {len(text)} characters is over quota.max_expr_length "
            f"({quota.max_expr_length})"
        )
    if bracket_depth(text) > quota.max_expr_depth:
        raise _too_deep(quota)
    try:
        tree = parse(text, params or None, zone)
    except ExprError as exc:
        raise errors.invalid(str(exc)) from exc
    except RecursionError as exc:
        raise _too_deep(quota) from exc
    if tree_depth(tree) > quota.max_expr_depth:
        raise _too_deep(quota)
    return tree


def _too_deep(quota: QuotaConfig) -> MilvusError:
    return errors.invalid(
        f"expression nested deeper than quota.max_expr_depth ({quota.max_expr_depth})"
    )


def bracket_depth(text: str) -> int:
    """Deepest nesting of ``(`` and ``[`` outside string literals."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if char == quote and not escaped:
                quote = ""
            escaped = not escaped and char == "\\"
            continue
        if char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]":
            depth = max(depth - 1, 0)
    return deepest


def tree_depth(tree: Expr) -> int:
    """Height of an expression tree, walked without recursion."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children())
    return deepest


def share(limit: float, proxies: int) -> float:
    """This proxy's part of a cluster-wide ``limit`` when ``proxies`` proxies are live, as
    Milvus's quota center splits its limits: evenly, so the sum over the proxies is the
    limit (a load balancer spreads clients; a proxy never counts fewer than itself)."""
    return limit / max(1, proxies)


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """A token bucket per (user, kind): refilled at this proxy's share of the kind's
    cluster-wide rate and holding one second's worth, so a user may burst up to one second
    of traffic. A kind whose rate is 0 is not metered; the whole limiter is a no-op unless
    ``quota.rate_limit_enabled``. The share follows :meth:`set_proxies` (the proxy watches
    the proxies' sessions), so the sum admitted over the cluster stays near the rate."""

    def __init__(
        self, quota: QuotaConfig, clock: Callable[[], float] = time.monotonic, proxies: int = 1
    ) -> None:
        self._enabled = quota.rate_limit_enabled
        self._limits = {
            DML: quota.dml_rate_mb * 1024 * 1024,
            SEARCH: quota.search_rate_vps,
            QUERY: quota.query_rate_qps,
        }
        self._units = {DML: "bytes/s", SEARCH: "vectors/s", QUERY: "requests/s"}
        self._clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()
        self._proxies = max(1, proxies)

    @property
    def proxies(self) -> int:
        return self._proxies

    def set_proxies(self, proxies: int) -> None:
        """``proxies`` are live now: each enforces ``limit / proxies`` from here on. Buckets
        fuller than the new share are cut down to it (a join must not leave a burst of the
        old, larger share)."""
        with self._lock:
            self._proxies = max(1, proxies)
            for (_, kind), bucket in self._buckets.items():
                bucket.tokens = min(bucket.tokens, share(self._limits[kind], self._proxies))

    def rate(self, kind: str) -> float:
        """This proxy's rate of ``kind`` now (0: unmetered)."""
        return share(self._limits.get(kind, 0.0), self._proxies)

    def charge(self, user: str, kind: str, amount: float) -> None:
        """Take ``amount`` units of ``kind`` from ``user``'s bucket, or refuse with RATE_LIMIT.

        A request larger than a full bucket is let through when the bucket is full (it
        could never pass otherwise) and leaves the bucket in debt, which delays the next one.
        """
        if not self._enabled or self._limits.get(kind, 0.0) <= 0:
            return
        now = self._clock()
        with self._lock:
            rate = self.rate(kind)
            bucket = self._buckets.setdefault((user, kind), _Bucket(rate, now))
            bucket.tokens = min(rate, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
            if bucket.tokens < min(amount, rate):
                raise MilvusError(
                    Code.RATE_LIMIT,
                    f"rate limit exceeded[user={user}][kind={kind}][rate={rate:g} "
                    f"{self._units[kind]} = {self._limits[kind]:g} / {self._proxies} "
                    "proxies] (quota.*)",
                )
            bucket.tokens -= amount
