"""A policy server that answers /act with whatever bytes a test gives it (a broken or hostile server)."""
from __future__ import annotations

import threading


class HostileServer:
    """A real HTTP server speaking the protocol's /health and /reset but answering /act with ``act_body`` bytes
    (what a broken or hostile policy server sends). Counts /act calls; after ``max_calls`` it answers 400 so that a
    client that would spin forever ends (and the test can say it spun)."""

    def __init__(self, act_body: bytes, max_calls: int = 200):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from real2sim.evaluation.policies.remote import pack

        self.calls = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code, data):
                self.send_response(code)
                self.send_header("Content-Type", "application/msgpack")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, pack({"status": "ok", "protocol": 1, "name": "hostile"}))

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/act":
                    self._send(200, pack({"ok": True}))
                    return
                outer.calls += 1
                if outer.calls > max_calls:
                    self._send(400, pack({"error": "too many calls: the client spins"}))
                else:
                    self._send(200, act_body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

