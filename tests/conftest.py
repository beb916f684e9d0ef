"""Fixtures shared by the integration and the fuzz tests."""

from __future__ import annotations

import os

# before faiss loads: one OpenMP thread per calling thread, as server processes run it
# (services/cli.py); faiss's default spins a thread per core on every small search
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from tests.infra import running_infra
from vectide.services.common.config import Config


@pytest.fixture(scope="session")
def infra() -> Config:
    """ZooKeeper, the broker and S3 on the test ports, once per session (tests/infra.py)."""
    with running_infra() as config:
        yield config
