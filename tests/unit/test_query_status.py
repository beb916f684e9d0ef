"""`vectide status`'s query figures, read from /metrics text as the roles serve it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from vectide.services.infra.query_status import query_status

NODE = """# TYPE vectide_querynode_memory_percent gauge
vectide_querynode_memory_percent{node_id="7"} 41.26
# TYPE vectide_querynode_sealed_segments gauge
vectide_querynode_sealed_segments{node_id="7"} 3.0
# TYPE vectide_querynode_rows gauge
vectide_querynode_rows{node_id="7"} 9000.0
"""
COORD = """# TYPE vectide_querycoord_segment_moves gauge
vectide_querycoord_segment_moves{outcome="done"} 4.0
vectide_querycoord_segment_moves{outcome="failed"} 1.0
"""


def serve(text: str) -> HTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_query_status_reads_node_figures_and_moves_and_skips_silent_roles():
    node, coord = serve(NODE), serve(COORD)
    try:
        urls = [f"http://127.0.0.1:{s.server_port}/metrics" for s in (node, coord)]
        status = query_status([*urls, "http://127.0.0.1:9/metrics"])
    finally:
        node.shutdown()
        coord.shutdown()
    assert status == {
        "nodes": [{"node_id": 7, "memory_percent": 41.3, "sealed_segments": 3.0, "rows": 9000.0}],
        "segment_moves": {"done": 4, "failed": 1},
    }
