"""One REST request as its handlers see it, and the API they call through (``RestApi`` in
rest_api.py is it). Apart from rest_api.py so the handler modules it routes to need not
import it back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pymilvus.grpc_gen import schema_pb2

from vectide.services.proxy import rest_body as rb


@dataclass
class RestCall:
    """One request: its body, database and how int64 values are rendered."""

    body: dict[str, Any]
    db_name: str
    int64_as_number: bool = True
    #: time.monotonic() by which reads give up (``Request-Timeout``)
    deadline: float | None = None

    @property
    def collection(self) -> str:
        return rb.get(self.body, "collectionName", str)


Handler = Callable[[RestCall], Any]


class RestCaller(Protocol):
    """What handlers use of the REST API: the gRPC service's methods, guarded."""

    def call(
        self, method: str, request: Any, db_name: str, deadline: float | None = None
    ) -> Any: ...
    def schema(self, call: RestCall) -> schema_pb2.CollectionSchema: ...
    def empty(self, method: str, request: Any, call: RestCall) -> dict[str, Any]: ...
