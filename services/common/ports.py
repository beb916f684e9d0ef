"""Contracts between roles that more than one core depends on."""

from __future__ import annotations

from typing import Protocol

from vectide.services.common.schema import CollectionInfo


class CollectionSource(Protocol):
    """Where collection meta comes from (the rootcoord, or its RPC client)."""

    def describe_collection(
        self, name: str | None = None, collection_id: int = 0
    ) -> CollectionInfo: ...
