"""The supervisor's policy: bring-up order, restarts with back-off, shutdown (no processes)."""

from __future__ import annotations

import signal

import pytest

from vectide.services.infra.supervision import (
    Backoff,
    Exited,
    Phase,
    Ready,
    Shutdown,
    Start,
    SupervisionPolicy,
    Tick,
    describe_exit,
)

ORDER = ["rootcoord", "rootcoord-1", "querynode-0", "proxy-0"]


def brought_up(backoff: Backoff | None = None) -> SupervisionPolicy:
    """A policy whose every role was started and became ready at t = 0."""
    policy = SupervisionPolicy(list(ORDER), backoff or Backoff())
    starts = policy.handle(Tick(0.0))
    for name in ORDER:
        assert [s.name for s in starts] == [name]
        starts = policy.handle(Ready(name, 0.0))
    assert starts == []
    return policy


def names(starts: list[Start]) -> list[str]:
    return [s.name for s in starts]


def test_bring_up_starts_each_role_once_the_previous_one_is_ready() -> None:
    policy = SupervisionPolicy(list(ORDER))
    assert names(policy.handle(Tick(0.0))) == ["rootcoord"]
    assert policy.handle(Tick(1.0)) == []  # the rootcoord is not ready yet
    assert names(policy.handle(Ready("rootcoord", 2.0))) == ["rootcoord-1"]
    assert policy.handle(Tick(3.0)) == []
    assert names(policy.handle(Ready("rootcoord-1", 4.0))) == ["querynode-0"]
    assert names(policy.handle(Ready("querynode-0", 5.0))) == ["proxy-0"]
    assert policy.handle(Ready("proxy-0", 6.0)) == []
    assert all(r.phase is Phase.RUNNING and r.restarts == 0 for r in policy.roles.values())


def test_an_exited_role_is_restarted_after_the_initial_backoff_with_its_reason() -> None:
    policy = brought_up(Backoff(initial_s=1.0))
    assert policy.handle(Exited("querynode-0", 100.0, -signal.SIGKILL)) == []
    assert policy.handle(Tick(100.9)) == []
    starts = policy.handle(Tick(101.0))
    assert starts == [Start("querynode-0", 1, "signal SIGKILL", 1.0)]
    record = policy.roles["querynode-0"]
    assert (record.restarts, record.last_exit, record.phase) == (1, "signal SIGKILL", Phase.RUNNING)
    assert record.to_dict()["restarts"] == 1


def test_repeated_crashes_double_the_wait_up_to_the_cap() -> None:
    policy = brought_up(Backoff(initial_s=1.0, multiplier=2.0, max_s=5.0, stable_after_s=60.0))
    now, waits = 10.0, []
    for _ in range(5):
        policy.handle(Exited("proxy-0", now, 3))
        exited_at = now
        while not policy.handle(Tick(now)):
            now += 0.25
        waits.append(now - exited_at)
        now += 0.5  # crashes again half a second after each start
    assert waits == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.roles["proxy-0"].restarts == 5
    assert policy.roles["proxy-0"].last_exit == "exit code 3"


def test_a_role_that_ran_stably_starts_its_backoff_again() -> None:
    policy = brought_up(Backoff(initial_s=1.0, multiplier=2.0, max_s=30.0, stable_after_s=60.0))
    policy.handle(Exited("proxy-0", 10.0, 1))
    assert names(policy.handle(Tick(11.0))) == ["proxy-0"]
    policy.handle(Exited("proxy-0", 12.0, 1))  # crashed again at once: waits 2 s
    assert policy.handle(Tick(13.5)) == []
    assert names(policy.handle(Tick(14.0))) == ["proxy-0"]
    policy.handle(Exited("proxy-0", 14.0 + 61.0, 1))  # ran 61 s: stable, 1 s again
    assert names(policy.handle(Tick(76.0))) == ["proxy-0"]


def test_nothing_starts_after_shutdown() -> None:
    policy = brought_up()
    policy.handle(Exited("rootcoord", 5.0, -signal.SIGTERM))
    assert policy.handle(Shutdown(5.1)) == []
    assert policy.handle(Tick(100.0)) == []
    assert policy.handle(Exited("proxy-0", 101.0, 0)) == []
    assert {r.phase for r in policy.roles.values()} == {Phase.STOPPED}


def test_a_crash_during_bring_up_restarts_the_role_and_holds_the_later_ones() -> None:
    policy = SupervisionPolicy(list(ORDER), Backoff(initial_s=1.0))
    policy.handle(Tick(0.0))
    policy.handle(Exited("rootcoord", 0.5, 2))
    assert policy.handle(Tick(1.0)) == []  # waiting; rootcoord-1 is not started meanwhile
    assert names(policy.handle(Tick(1.5))) == ["rootcoord"]
    assert names(policy.handle(Ready("rootcoord", 2.0))) == ["rootcoord-1"]


def test_stale_exit_reports_are_ignored() -> None:
    policy = brought_up()
    policy.handle(Exited("proxy-0", 1.0, 1))
    policy.handle(Exited("proxy-0", 1.1, 1))  # reported twice: one restart, one row
    assert policy.roles["proxy-0"].exits_in_a_row == 1


@pytest.mark.parametrize(
    ("code", "text"),
    [(3, "exit code 3"), (0, "exit code 0"), (-9, "signal SIGKILL"), (None, "unknown")],
)
def test_exit_descriptions(code: int | None, text: str) -> None:
    assert describe_exit(code) == text
