"""The proxy's resource limits and per-user token buckets (services/proxy/limits.py)."""

from __future__ import annotations

import pytest

from vectide.services.common.config import QuotaConfig
from vectide.services.common.errors import Code, MilvusError
from vectide.services.proxy import limits
from vectide.services.proxy.limits import DML, QUERY, SEARCH, RateLimiter, share

QUOTA = QuotaConfig()


def _code(call) -> Code:
    with pytest.raises(MilvusError) as caught:
        call()
    return caught.value.code


def test_search_limits_default_to_milvus():
    limits.check_search(QUOTA, 16384, 16384)
    assert _code(lambda: limits.check_search(QUOTA, 16385, 10)) == Code.PARAMETER_INVALID
    assert _code(lambda: limits.check_search(QUOTA, 1, 16385)) == Code.PARAMETER_INVALID
    assert _code(lambda: limits.check_search(QUOTA, 0, 10)) == Code.PARAMETER_INVALID
    small = QuotaConfig(max_nq=2, max_topk=5)
    with pytest.raises(MilvusError, match=r"quota.max_nq"):
        limits.check_search(small, 3, 5)


def test_dim_and_collection_count():
    limits.check_dim(QUOTA, "v", 32768)
    assert _code(lambda: limits.check_dim(QUOTA, "v", 40000)) == Code.COLLECTION_ILLEGAL_SCHEMA
    limits.check_collection_count(QuotaConfig(max_collections=2), 1)
    refused = _code(lambda: limits.check_collection_count(QuotaConfig(max_collections=2), 2))
    assert refused == Code.COLLECTION_NUM_LIMIT_EXCEEDED


@pytest.mark.parametrize(
    "text",
    [
        "(" * 10_000 + "a > 1" + ")" * 10_000,  # would exhaust the parser's stack
        "a in " + "[" * 5_000 + "]" * 5_000,
        " + ".join(["a"] * 200) + " > 1",  # a flat text, a deep tree
        "(" * 33 + "a > 1" + ")" * 33,
    ],
)
def test_deep_filters_are_refused_before_they_recurse(text):
    with pytest.raises(MilvusError, match=r"quota.max_expr_depth") as caught:
        limits.parse_filter(QUOTA, text, None)
    assert caught.value.code == Code.PARAMETER_INVALID


def test_brackets_inside_strings_do_not_count_and_normal_filters_pass():
    tree = limits.parse_filter(QUOTA, 'name == "' + "(" * 40 + '" and a > 1', None)
    assert limits.tree_depth(tree) <= 3
    limits.parse_filter(QUOTA, "(" * 30 + "a > 1" + ")" * 30, None)
    assert limits.bracket_depth(r'x == "\"((" and (a > 1)') == 1


def test_long_filters_are_refused():
    text = " or ".join(f"a == {i}" for i in range(10_000))
    with pytest.raises(MilvusError, match=r"quota.max_expr_length"):
        limits.parse_filter(QUOTA, text, None)
    limits.parse_filter(QuotaConfig(max_expr_length=10**6), text, None)  # flat: depth 3


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_is_off_by_default():
    limiter = RateLimiter(QuotaConfig(search_rate_vps=1))
    for _ in range(100):
        limiter.charge("alice", SEARCH, 1000)


def test_token_bucket_per_user_and_kind():
    clock = _Clock()
    quota = QuotaConfig(rate_limit_enabled=True, search_rate_vps=10, query_rate_qps=2)
    limiter = RateLimiter(quota, clock)
    limiter.charge("alice", SEARCH, 6)
    limiter.charge("alice", SEARCH, 4)  # one second's worth, spent
    with pytest.raises(MilvusError, match=r"user=alice") as caught:
        limiter.charge("alice", SEARCH, 1)
    assert caught.value.code == Code.RATE_LIMIT and caught.value.legacy_code == 49
    limiter.charge("bob", SEARCH, 10)  # another user has its own bucket
    limiter.charge("alice", QUERY, 2)  # and another kind
    limiter.charge("alice", DML, 10**9)  # a kind with rate 0 is not metered
    clock.now += 0.5  # half a second refills half the bucket
    limiter.charge("alice", SEARCH, 5)
    with pytest.raises(MilvusError):
        limiter.charge("alice", SEARCH, 1)


def test_a_request_larger_than_the_bucket_passes_when_full_then_waits():
    clock = _Clock()
    limiter = RateLimiter(QuotaConfig(rate_limit_enabled=True, dml_rate_mb=1), clock)
    limiter.charge("u", DML, 3 * 1024 * 1024)  # 3 MB at 1 MB/s: allowed once, in debt
    clock.now += 1.0
    with pytest.raises(MilvusError):
        limiter.charge("u", DML, 1)
    clock.now += 2.5
    limiter.charge("u", DML, 1)


def test_a_cluster_wide_rate_is_split_evenly_over_the_live_proxies():
    assert share(12, 3) == 4 and share(12, 1) == 12
    assert share(12, 0) == 12  # a proxy always counts itself


def _admitted(limiter: RateLimiter, clock: _Clock, seconds: float, step: float = 0.01) -> int:
    """Search vectors ``limiter`` admits to one user sending one every ``step`` seconds."""
    admitted = 0
    for _ in range(round(seconds / step)):
        clock.now += step
        try:
            limiter.charge("alice", SEARCH, 1)
            admitted += 1
        except MilvusError:
            pass
    return admitted


def test_each_proxy_enforces_its_share_and_the_sum_stays_at_the_limit():
    clock = _Clock()
    quota = QuotaConfig(rate_limit_enabled=True, search_rate_vps=20)
    limiters = [RateLimiter(quota, clock, proxies=2) for _ in range(2)]
    assert limiters[0].rate(SEARCH) == 10
    with pytest.raises(MilvusError, match=r"rate=10 vectors/s = 20 / 2 proxies"):
        for _ in range(11):
            limiters[0].charge("alice", SEARCH, 1)
    # a client hammering both proxies for 10 s gets the cluster's 20/s, not 40/s
    total = sum(_admitted(limiter, clock, 10.0) for limiter in limiters)
    assert 200 <= total <= 200 + 2 * 10 + 2  # the rate, plus at most one burst per proxy


def test_the_share_follows_proxies_joining_and_leaving():
    clock = _Clock()
    limiter = RateLimiter(QuotaConfig(rate_limit_enabled=True, query_rate_qps=12), clock)
    assert limiter.rate(QUERY) == 12
    limiter.charge("alice", QUERY, 1)  # a full bucket of 12, 11 left
    limiter.set_proxies(3)  # two joined: the bucket is cut to the new share at once
    assert limiter.rate(QUERY) == 4
    for _ in range(4):
        limiter.charge("alice", QUERY, 1)
    with pytest.raises(MilvusError):
        limiter.charge("alice", QUERY, 1)
    limiter.set_proxies(1)  # they left: the whole rate again, refilling at 12/s
    clock.now += 1.0
    assert _admitted(limiter, clock, 1.0, step=1 / 24) == 12 + 12
    assert limiter.rate(DML) == 0  # unconfigured kinds stay unmetered
