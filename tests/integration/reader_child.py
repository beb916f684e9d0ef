"""A second client in its own process: reads JSON commands on stdin, answers on stdout.

``{"collection": name, "vector": [...]}`` -> ``{"ids": [...]}`` (a Strong search) or
``{"error": "..."}``.
"""

import json
import sys

from pymilvus import MilvusClient


def main() -> None:
    client = MilvusClient(sys.argv[1])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            hits = client.search(
                cmd["collection"], [cmd["vector"]], limit=10, consistency_level="Strong"
            )[0]
            print(json.dumps({"ids": sorted(h["id"] for h in hits)}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": str(exc)}), flush=True)


if __name__ == "__main__":
    main()
