import pytest

from tests.contract.kv_contract import KVContract
from vectide.services.common.kv import MemoryKV


class TestMemoryKV(KVContract):
    @pytest.fixture
    def kv(self):
        return MemoryKV()
