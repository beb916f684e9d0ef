"""Fixtures shared by the integration and the fuzz tests."""

from __future__ import annotations

import pytest

from tests.infra import running_infra
from vectide.services.common.config import Config


@pytest.fixture(scope="session")
def infra() -> Config:
    """ZooKeeper, the broker and S3 on the test ports, once per session (tests/infra.py)."""
    with running_infra() as config:
        yield config
