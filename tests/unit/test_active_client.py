"""``ActiveClient`` against real local gRPC servers (no ZooKeeper: a fake registry): hot-path
calls fail fast on a stalled leader, and a leader whose session ends is left at once."""

from __future__ import annotations

import threading
import time

import pytest

from vectide.services.common.discovery import ActiveClient
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.rpc.transport import generic_handler, new_server
from vectide.services.common.session import SessionInfo


class Coordinator:
    """A rootcoord stand-in: ``slow`` answers only when released (a stalled process)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = threading.Event()

    def alloc_timestamp(self) -> str:
        self.release.wait(10)
        return self.name

    def slow(self) -> str:
        self.release.wait(10)
        return self.name

    def whoami(self) -> str:
        return self.name


class FakeRegistry:
    def __init__(self) -> None:
        self.current: dict[int, SessionInfo] = {}
        self.callbacks: list = []

    def members(self, role: str) -> dict[int, SessionInfo]:
        return dict(self.current)

    def watch(self, role: str, callback) -> None:
        self.callbacks.append(callback)
        callback(dict(self.current))

    def set(self, members: dict[int, SessionInfo]) -> None:
        self.current = dict(members)
        for callback in self.callbacks:
            callback(dict(members))


@pytest.fixture
def servers():
    started = []

    def serve(name: str) -> tuple[Coordinator, str]:
        coordinator = Coordinator(name)
        server = new_server(max_workers=4)
        methods = ("alloc_timestamp", "slow", "whoami")
        server.add_generic_rpc_handlers((generic_handler("RootCoord", coordinator, methods),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        started.append((server, coordinator))
        return coordinator, f"127.0.0.1:{port}"

    yield serve
    for server, coordinator in started:
        coordinator.release.set()
        server.stop(grace=0)


def member(server_id: int, address: str) -> SessionInfo:
    return SessionInfo("rootcoord", server_id, address)


def test_a_fail_fast_method_gives_up_with_a_retriable_error(servers):
    _, address = servers("stalled")
    registry = FakeRegistry()
    registry.set({1: member(1, address)})
    client = ActiveClient(registry, "rootcoord", "RootCoord", fail_fast={"alloc_timestamp": 0.5})
    started = time.monotonic()
    with pytest.raises(MilvusError) as raised:
        client.alloc_timestamp()
    assert time.monotonic() - started < 2.0
    assert raised.value.code == Code.SERVICE_UNAVAILABLE
    assert "alloc_timestamp within 0.5 s" in raised.value.message
    assert client.whoami() == "stalled"  # other methods still reach it


def test_a_call_waiting_on_a_leader_whose_session_ended_moves_to_the_new_leader(servers):
    _, old_address = servers("old")
    new, new_address = servers("new")
    new.release.set()
    registry = FakeRegistry()
    registry.set({1: member(1, old_address)})
    client = ActiveClient(registry, "rootcoord", "RootCoord", patience_s=10)
    result: list[str] = []
    caller = threading.Thread(target=lambda: result.append(client.slow()))
    caller.start()
    time.sleep(0.5)  # the call now waits on the stalled leader
    started = time.monotonic()
    registry.set({})  # its session expired: the call is cancelled and retried
    time.sleep(0.3)
    registry.set({2: member(2, new_address)})  # the standby registered
    caller.join(timeout=5)
    assert result == ["new"]
    assert time.monotonic() - started < 3.0
