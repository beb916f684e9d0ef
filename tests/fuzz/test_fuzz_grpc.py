"""Generated requests to the main RPCs, some with their bytes mangled, while the writer and
the reader run: every answer a clear status, no hang, no exception escaping validation, and
every row the writer was told is written still there."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.conftest import REQUESTS
from tests.fuzz.harness import CrashCatcher
from tests.fuzz.strategies import calls

# Hypothesis warns when the global `random` state moves during generation: here the writer
# and reader threads' clients move it, not the strategies.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")

_RUN = {"sent": 0, "ok": 0}


def _mangle(payload: bytes, noise: bytes) -> bytes:
    cut = len(noise) and noise[0] % (len(payload) + 1)
    return payload[:cut] + noise + payload[cut + len(noise) :]


@settings(
    max_examples=REQUESTS,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(call=calls)
def _fuzz(target, call) -> None:
    rpc, request, mutate, noise = call
    raw = _mangle(request.SerializeToString(), noise) if mutate else None
    reply = target.caller.call(rpc, request, raw)
    _RUN["sent"] += 1
    status = None if reply is None else getattr(reply, "status", reply)
    _RUN["ok"] += int(status is not None and status.code == 0 and status.error_code == 0)


# pytest-timeout's 300 s is per test: allow 0.2 s a request (10,000 took 275-330 s here)
@pytest.mark.timeout(max(300, int(REQUESTS * 0.2)))
def test_generated_requests_get_clear_answers_and_lose_no_rows(target):
    started = time.monotonic()
    with CrashCatcher() as catcher:
        _fuzz(target)
    elapsed = time.monotonic() - started
    print(
        f"fuzz: {_RUN['sent']} requests in {elapsed:.0f} s, {_RUN['ok']} succeeded; "
        f"writer {len(target.traffic.written)} rows, reader {target.traffic.reads} reads"
    )
    assert _RUN["sent"] >= REQUESTS
    assert not catcher.crashes, "\n".join(catcher.kinds())
    assert not target.traffic.problems, target.traffic.problems[:10]
    assert target.traffic.reads > 0 and target.traffic.written
    assert not target.traffic.missing()
