"""Collection properties that change what Vectide does, and their checks.

Milvus keeps a collection's properties as free key/value pairs (CreateCollection's
``properties``, AlterCollection) and acts on a few of them; Vectide stores every pair the same
way and acts on ``collection.ttl.seconds``: rows older than that many seconds are no longer
read (docs/compatibility.md, "Collection properties"). The others it keeps and describes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vectide.services.common import errors, timestamp
from vectide.services.common.schema import CollectionInfo

#: Milvus's key (``common.CollectionTTLConfigKey``): seconds a row stays readable after it was
#: inserted (upserted rows start again); 0 or negative: forever
TTL_KEY = "collection.ttl.seconds"


def check(properties: Mapping[str, str]) -> None:
    """Refuse values Vectide would act on wrongly (as Milvus's proxy does at create and alter)."""
    value = properties.get(TTL_KEY)
    if value is not None:
        try:
            int(value)
        except ValueError:
            raise errors.invalid(
                f"collection TTL is not a valid positive integer: {TTL_KEY}={value!r}"
            ) from None


def ttl_seconds(properties: Mapping[str, str]) -> int:
    """The collection's TTL in seconds, 0 for none (values are checked when set)."""
    try:
        return max(int(properties.get(TTL_KEY, 0)), 0)
    except ValueError:  # stored before values were checked
        return 0


def expire_ts(properties: Mapping[str, str], read_ms: int) -> int:
    """The oldest insert stamp a read at wall-clock ``read_ms`` returns (0: no bound)."""
    ttl = ttl_seconds(properties)
    if not ttl:
        return 0
    return timestamp.compose(max(read_ms - ttl * 1000, 0))


def expiries(collections: Iterable[CollectionInfo], read_ms: int) -> dict[int, int]:
    """Per collection with a TTL, ``expire_ts`` at ``read_ms``: garbage collection drops
    segments whose rows are all older (a read at ``read_ms`` or later returns none of them)."""
    bounds = {c.collection_id: expire_ts(c.properties, read_ms) for c in collections}
    return {collection_id: ts for collection_id, ts in bounds.items() if ts}
