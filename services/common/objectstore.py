"""S3 object storage for binlogs and index files (boto3, path-style, retried).

Keys given to this class are relative to ``{bucket}/{root_path}/``, which it prepends, so
callers speak Milvus's layout (``insert_log/{coll}/{part}/{seg}/{field}/{log}``) directly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from vectide.services.common.config import S3Config


class ObjectStoreError(RuntimeError):
    pass


class ObjectStore:
    def __init__(
        self, cfg: S3Config, connect_timeout_s: float = 5.0, sign_payload: bool = True
    ) -> None:
        """``sign_payload=False`` sends puts as UNSIGNED-PAYLOAD: no SHA-256 of every body
        (the data node's executors spent 8-14 % of their time on it); the request is still
        signed and the body still carries its CRC32 checksum."""
        self._bucket = cfg.bucket
        self._root = cfg.root_path.strip("/")
        self._s3 = boto3.client(
            "s3",
            endpoint_url=cfg.endpoint,
            aws_access_key_id=cfg.access_key,
            aws_secret_access_key=cfg.secret_key,
            region_name=cfg.region,
            config=BotoConfig(
                # None: botocore's own choice (it signs bodies over http, not over https)
                s3={
                    "addressing_style": "path",
                    "payload_signing_enabled": None if sign_payload else False,
                },
                retries={"max_attempts": 6, "mode": "standard"},
                connect_timeout=connect_timeout_s,
                read_timeout=60,
            ),
        )

    @property
    def bucket(self) -> str:
        return self._bucket

    def _key(self, key: str) -> str:
        return f"{self._root}/{key.lstrip('/')}" if self._root else key.lstrip("/")

    def ensure_bucket(self) -> None:
        try:
            self._s3.head_bucket(Bucket=self._bucket)
            return
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("404", "NoSuchBucket", "NotFound"):
                raise ObjectStoreError(f"bucket {self._bucket}: {exc}") from exc
        try:
            self._s3.create_bucket(Bucket=self._bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise ObjectStoreError(f"cannot create bucket {self._bucket}: {exc}") from exc

    def put(self, key: str, data: bytes) -> None:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=self._key(key), Body=data)
        except ClientError as exc:
            raise ObjectStoreError(f"put {key}: {exc}") from exc

    def get(self, key: str) -> bytes:
        try:
            return self._s3.get_object(Bucket=self._bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise KeyError(key) from exc
            raise ObjectStoreError(f"get {key}: {exc}") from exc

    def size(self, key: str) -> int | None:
        """The object's size in bytes; None when there is no such object."""
        try:
            head = self._s3.head_object(Bucket=self._bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return None
            raise ObjectStoreError(f"head {key}: {exc}") from exc
        return int(head["ContentLength"])

    def exists(self, key: str) -> bool:
        return self.size(key) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix`` (relative to the root), in lexical order."""
        return (key for key, _ in self.list_ages(prefix))

    def list_ages(self, prefix: str = "") -> Iterator[tuple[str, float]]:
        """(key, seconds since it was last written) under ``prefix``: garbage collection
        leaves objects younger than its delay alone (a writer records them after writing)."""
        full = self._key(prefix)
        strip = len(self._root) + 1 if self._root else 0
        paginator = self._s3.get_paginator("list_objects_v2")
        now = time.time()
        try:
            for page in paginator.paginate(Bucket=self._bucket, Prefix=full):
                for obj in page.get("Contents", []):
                    yield obj["Key"][strip:], now - obj["LastModified"].timestamp()
        except ClientError as exc:
            raise ObjectStoreError(f"list {prefix}: {exc}") from exc

    def delete(self, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=self._bucket, Key=self._key(key))
        except ClientError as exc:
            raise ObjectStoreError(f"delete {key}: {exc}") from exc

    def delete_prefix(self, prefix: str) -> int:
        keys = list(self.list(prefix))
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[start : start + 1000]]
            try:
                self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": batch})
            except ClientError as exc:
                raise ObjectStoreError(f"delete {prefix}*: {exc}") from exc
        return len(keys)
