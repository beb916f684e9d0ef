import pytest

from services.common.kv import MemoryKV
from tests.contract.kv_contract import KVContract


class TestMemoryKV(KVContract):
    @pytest.fixture
    def kv(self):
        return MemoryKV()
