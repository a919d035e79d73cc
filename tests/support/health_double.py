"""An engine double for lifecycle tests: binds HOST:PORT and answers /health.

Not vLLM — it stands in where the engine's own behaviour is not under test
(port races, hangs). Modes: `serve` (healthy at once), `hang` (never binds,
never healthy), `crash-after S` (healthy, then exits with an error after S s).
"""

from __future__ import annotations

import http.server
import sys
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    print(f"INFO double starting on {host}:{port} mode={mode}", flush=True)
    if mode == "hang":
        time.sleep(3600)
    server = http.server.ThreadingHTTPServer((host, port), _Handler)  # raises Errno 98 if taken
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("INFO Using DOUBLE_ATTN backend.", flush=True)
    if mode.startswith("crash-after"):
        time.sleep(float(sys.argv[4]))
        print("RuntimeError: engine double crashed on purpose", flush=True)
        sys.exit(3)
    time.sleep(3600)


if __name__ == "__main__":
    main()
