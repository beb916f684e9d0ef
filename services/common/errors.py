"""Errors every core raises, carrying Milvus status codes so pymilvus understands them.

A status has two codes: ``code`` (Milvus 2.3+ merr numbers, what pymilvus checks first) and
the legacy ``error_code`` enum. Adapters turn a :class:`MilvusError` into a ``Status``; any
other exception becomes an unexpected error with its message.
"""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    """Milvus merr codes (pkg/util/merr) that Vectide uses."""

    SUCCESS = 0
    SERVICE_NOT_READY = 1
    SERVICE_UNAVAILABLE = 2
    SERVICE_INTERNAL = 5
    #: a user's per-second quota is used up (``quota.*``); pymilvus retries it with back-off
    RATE_LIMIT = 8
    UNIMPLEMENTED = 10
    COLLECTION_NOT_FOUND = 100
    COLLECTION_NOT_LOADED = 101
    COLLECTION_NUM_LIMIT_EXCEEDED = 102
    COLLECTION_ILLEGAL_SCHEMA = 105
    #: an insert built against an older schema (its ``schema_timestamp``): pymilvus
    #: refreshes its cached schema and sends it again
    COLLECTION_SCHEMA_MISMATCH = 109
    PARTITION_NOT_FOUND = 200
    PARTITION_NOT_LOADED = 201
    RESOURCE_GROUP_NOT_FOUND = 300
    RESOURCE_GROUP_ALREADY_EXIST = 301
    RESOURCE_GROUP_REACH_LIMIT = 302
    RESOURCE_GROUP_ILLEGAL_CONFIG = 303
    RESOURCE_GROUP_NODE_NOT_ENOUGH = 304
    SEGMENT_NOT_FOUND = 600
    INDEX_NOT_FOUND = 700
    INDEX_DUPLICATE = 702
    DATABASE_NOT_FOUND = 800
    DATABASE_NUM_LIMIT_EXCEEDED = 801
    DATABASE_INVALID_NAME = 802
    NODE_NOT_FOUND = 901
    PARAMETER_INVALID = 1100
    PARAMETER_MISSING = 1101
    #: wrong credentials where a reply carries them (UpdateCredential's old password)
    PRIVILEGE_NOT_AUTHENTICATED = 1400
    PRIVILEGE_NOT_PERMITTED = 1401
    #: a read's guarantee timestamp was not reached in time (a stalled or lagging channel)
    TIMETICK_LAG = 2
    DDL_OUT_OF_ORDER = 1000
    ALIAS_NOT_FOUND = 1600
    ALIAS_COLLECTION_NAME_CONFLICT = 1601
    ALIAS_ALREADY_EXIST = 1602
    FIELD_NOT_FOUND = 1700
    #: the RESTful API's own codes (merr's "high-level restful api" block)
    NEED_AUTHENTICATE = 1800
    INCORRECT_PARAMETER_FORMAT = 1801
    MISSING_REQUIRED_PARAMETERS = 1802
    INVALID_INSERT_DATA = 1804
    INVALID_SEARCH_RESULT = 1805
    CHECK_PRIMARY_KEY = 1806
    #: a plain error in Milvus (fmt.Errorf): e.g. dropping a database that still has collections
    UNEXPECTED = 65535


#: legacy common.proto ErrorCode for each code (pymilvus < 2.3 reads only this).
_LEGACY = {
    Code.SUCCESS: 0,
    Code.COLLECTION_NOT_FOUND: 4,  # CollectionNotExists
    Code.INDEX_NOT_FOUND: 25,  # IndexNotExist
    Code.PARAMETER_INVALID: 5,  # IllegalArgument
    Code.PARAMETER_MISSING: 5,
    Code.COLLECTION_ILLEGAL_SCHEMA: 5,
    Code.TIMETICK_LAG: 55,  # TimeTickLongDelay
    Code.SERVICE_NOT_READY: 56,  # NotReadyServe
    Code.DDL_OUT_OF_ORDER: 1000,  # DDRequestRace
    Code.RATE_LIMIT: 49,  # RateLimit (pymilvus retries it)
    Code.COLLECTION_SCHEMA_MISMATCH: 62,  # SchemaMismatch (pymilvus retries it)
}


class MilvusError(Exception):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def legacy_code(self) -> int:
        return _LEGACY.get(self.code, 1)  # UnexpectedError

    def __str__(self) -> str:
        return f"{self.message} (code={int(self.code)})"


def collection_not_found(name: str) -> MilvusError:
    return MilvusError(Code.COLLECTION_NOT_FOUND, f"can't find collection[collection={name}]")


def collection_not_loaded(name: str) -> MilvusError:
    return MilvusError(Code.COLLECTION_NOT_LOADED, f"collection not loaded[collection={name}]")


def partition_not_found(name: str) -> MilvusError:
    return MilvusError(Code.PARTITION_NOT_FOUND, f"partition not found[partition={name}]")


def database_not_found(name: str) -> MilvusError:
    return MilvusError(Code.DATABASE_NOT_FOUND, f"database not found[database={name}]")


def invalid(message: str) -> MilvusError:
    return MilvusError(Code.PARAMETER_INVALID, message)
