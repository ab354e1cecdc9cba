"""An MCP-ish upstream that reads requests as json.loads(body_bytes) does:
it detects UTF-16 and UTF-32 (with a BOM or without) and a UTF-8 BOM
itself, and reads any method and content type. With pydantic, it reads
params as the official Python SDK's models do (alias_generator=to_camel,
populate_by_name=True: request_state is requestState too). It trusts any
requestState it gets, echoing it in its result, and answers a first round
with a plaintext state. Prints its URL on stdout, and pydantic=1 when it
reads params with pydantic."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

try:  # pydantic 2, as the SDK uses it
    from pydantic import BaseModel, ConfigDict
    from pydantic.alias_generators import to_camel

    class MCPModel(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def validate(cls, d):
        return cls.model_validate(d)
except ImportError:
    try:  # pydantic 1 (Debian 12's python3-pydantic): the same reading
        from pydantic import BaseModel

        def to_camel(s):
            first, *rest = s.split("_")
            return first + "".join(w.capitalize() for w in rest)

        class MCPModel(BaseModel):
            class Config:
                alias_generator = to_camel
                allow_population_by_field_name = True

        def validate(cls, d):
            return cls.parse_obj(d)
    except ImportError:
        MCPModel = None

if MCPModel is not None:

    class Params(MCPModel):
        input_responses: Optional[dict[str, Any]] = None
        request_state: Optional[str] = None
        name: Optional[str] = None
        arguments: Optional[dict[str, Any]] = None


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
        if MCPModel is not None and isinstance(params, dict):
            try:
                state = validate(Params, params).request_state
            except ValueError:
                pass
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
print("lenient upstream at http://127.0.0.1:%d pydantic=%d" % (srv.server_address[1], MCPModel is not None), flush=True)
srv.serve_forever()
