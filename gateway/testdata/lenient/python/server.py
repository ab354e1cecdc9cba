"""An MCP-ish upstream that reads requests as json.loads(body_bytes) does:
it detects UTF-16 and UTF-32 (with a BOM or without) and a UTF-8 BOM
itself, and reads any method and content type. It trusts any requestState
it gets, echoing it in its result, and answers a first round with a
plaintext state. The standard library only. Prints its URL on stdout."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        try:
            msg = json.loads(body) if body else {}
        except ValueError:
            msg = {}
        if not isinstance(msg, dict):
            msg = {}
        params = msg.get("params") or {}
        state = params.get("requestState") if isinstance(params, dict) else None
        if state:
            result = {"content": [{"type": "text", "text": "got " + str(state)}]}
        else:
            result = {"resultType": "input_required", "inputRequests": {}, "requestState": "plain:python"}
        out = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_PUT = do_PATCH = do_GET = do_DELETE = handle_any

    def log_message(self, *args):
        pass


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("lenient upstream at http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
