"""The REST HTTP adapter alone (no proxy behind it): JSON replies for every outcome, the
status codes Milvus's server uses, and a taken port refused before anything serves."""

from __future__ import annotations

import errno
import socket

import pytest
import requests

from vectide.services.proxy.rest import RestServer
from vectide.services.proxy.rest_api import RestApi


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server():
    port = free_port()
    rest = RestServer(RestApi(service=None), "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}/v2/vectordb"
    rest.stop()


def test_replies_are_json_with_milvus_codes(server) -> None:
    reply = requests.post(f"{server}/collections/list", data=b"not json", timeout=5)
    assert (reply.status_code, reply.json()["code"]) == (200, 1801)
    assert reply.headers["Content-Type"].startswith("application/json")
    reply = requests.post(f"{server}/collections/describe", json={}, timeout=5)
    assert (reply.status_code, reply.json()["code"]) == (200, 1802)
    reply = requests.post(f"{server}/no/such", json={}, timeout=5)
    assert reply.status_code == 404 and "no/such" in reply.json()["message"]
    reply = requests.get(f"{server}/collections/list", timeout=5)
    assert reply.status_code == 405 and reply.json()["code"] != 0


def test_a_taken_port_is_refused_at_start(server) -> None:
    port = int(server.split(":")[2].split("/")[0])
    with pytest.raises(OSError) as info:
        RestServer(RestApi(service=None), "127.0.0.1", port).start()
    assert info.value.errno == errno.EADDRINUSE
    # the first server still answers
    assert requests.post(f"{server}/collections/list", data=b"x", timeout=5).status_code == 200
