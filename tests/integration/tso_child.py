"""A TSO allocator in its own process, for restart tests: ``python -m tests.integration.tso_child
ROOT CLOCK_OFFSET_MS COUNT`` prints every stamp it hands out, one per line (COUNT 0: forever)."""

import sys

from vectide.services.common import timestamp
from vectide.services.common.config import load_config
from vectide.services.common.kv.zookeeper import ZooKeeperKV, connect_zookeeper
from vectide.services.common.tso import TSOAllocator


def main() -> None:
    root, offset_ms, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kv = ZooKeeperKV(connect_zookeeper(load_config().zookeeper), root)
    tso = TSOAllocator(kv, window_ms=200, clock=lambda: timestamp.now_ms() + offset_ms)
    tso.initialize()
    i = 0
    while count == 0 or i < count:
        print(tso.alloc(), flush=True)
        if i % 50 == 0:
            tso.update()
        i += 1


if __name__ == "__main__":
    main()
