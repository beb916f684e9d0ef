"""What the fuzz tests drive a standalone with: a raw gRPC caller that judges each reply, a
writer that inserts rows the whole time and a reader that checks them, and a log catcher
that turns any unexpected exception inside the proxy into a finding."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from pymilvus import MilvusClient
from pymilvus.grpc_gen import milvus_pb2

from tests.fuzz.strategies import DIM, WRITER

SERVICE = milvus_pb2.DESCRIPTOR.services_by_name["MilvusService"]
#: a call that takes longer hangs (the largest legal requests answer well within it)
DEADLINE_S = 20.0
#: gRPC-level refusals that are a clear answer, not a crash: a request over the size limit,
#: or bytes that do not parse as the request message
CLEAR_REFUSALS = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL}


class Caller:
    """Sends any request message, or raw bytes, to a Milvus RPC and checks the answer."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_send_message_length", 512 * 1024 * 1024),
                ("grpc.max_receive_message_length", 512 * 1024 * 1024),
            ],
        )
        self._stubs: dict[str, Any] = {}

    def _stub(self, rpc: str) -> Any:
        if rpc not in self._stubs:
            reply_type = SERVICE.methods_by_name[rpc].output_type._concrete_class
            self._stubs[rpc] = self._channel.unary_unary(
                f"/{SERVICE.full_name}/{rpc}",
                request_serializer=lambda data: data,
                response_deserializer=reply_type.FromString,
            )
        return self._stubs[rpc]

    def call(self, rpc: str, request: Any, raw: bytes | None = None) -> Any:
        """The reply, after asserting it is a clear answer: a status (success or a Milvus
        error with a reason) or one of the :data:`CLEAR_REFUSALS`; never a hang (deadline),
        an unhandled exception (UNKNOWN) or a dead server (UNAVAILABLE)."""
        payload = request.SerializeToString() if raw is None else raw
        try:
            reply = self._stub(rpc)(payload, timeout=DEADLINE_S)
        except grpc.RpcError as exc:
            code = exc.code()
            assert code in CLEAR_REFUSALS, f"{rpc}: {code.name} {exc.details()}"
            return None
        status = reply if reply.DESCRIPTOR.name == "Status" else reply.status
        if status.code or status.error_code:
            assert status.reason, f"{rpc}: error status without a reason: {status}"
        return reply

    def close(self) -> None:
        self._channel.close()


class CrashCatcher(logging.Handler):
    """Collects the proxy's "request failed" records: an exception that is not a Milvus
    error escaped validation (the reply says code 5 with the exception's text)."""

    LOGGERS = ("vectide.services.proxy.grpc_common", "vectide.services.common.rpc.transport")

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.crashes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        what = f"{type(exc).__name__}: {exc}" if exc else record.getMessage()
        self.crashes.append(f"{getattr(record, 'rpc', '?')}: {what}")

    def kinds(self) -> list[str]:
        """Each distinct finding once (the first 120 characters), for the failure message."""
        return sorted({crash[:120] for crash in self.crashes})

    def __enter__(self) -> CrashCatcher:
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)


@dataclass
class Traffic:
    """A writer inserting batches into :data:`WRITER` and a reader counting them (Strong),
    beside the fuzzer; ``problems`` holds what either saw go wrong."""

    uri: str
    batch: int = 20
    written: list[int] = field(default_factory=list, repr=False)
    problems: list[str] = field(default_factory=list)
    reads: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Traffic:
        for target in (self._write, self._read):
            thread = threading.Thread(target=target, name=f"fuzz-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _write(self) -> None:
        client = MilvusClient(self.uri)
        next_pk = 0
        while not self._stop.is_set():
            pks = list(range(next_pk, next_pk + self.batch))
            rows = [{"id": pk, "vector": [1.0, float(pk), 0.0, 0.0][:DIM]} for pk in pks]
            try:
                client.insert(WRITER, rows)
            except Exception as exc:
                self.problems.append(f"writer: {exc}")
                time.sleep(0.5)
                continue
            self.written.extend(pks)
            next_pk += self.batch
            time.sleep(0.05)

    def _read(self) -> None:
        client = MilvusClient(self.uri)
        while not self._stop.is_set():
            acknowledged = len(self.written)
            try:
                rows = client.query(WRITER, filter="", output_fields=["count(*)"])
                count = rows[0]["count(*)"]
            except Exception as exc:
                self.problems.append(f"reader: {exc}")
            else:
                self.reads += 1
                if count < acknowledged:
                    self.problems.append(f"reader: {count} rows, {acknowledged} acknowledged")
            time.sleep(0.3)

    def missing(self) -> set[int]:
        """The acknowledged primary keys a Strong query cannot find."""
        client = MilvusClient(self.uri)
        written = list(self.written)  # acknowledged before the Strong reads below start
        found: set[int] = set()
        for start in range(0, len(written), 5000):
            chunk = written[start : start + 5000]
            rows = client.query(
                WRITER, filter=f"id in {chunk}", output_fields=["id"], consistency_level="Strong"
            )
            found.update(row["id"] for row in rows)
        return set(written) - found
