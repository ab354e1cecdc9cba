// An MCP-ish upstream as an Express 5 app with express.json() reads
// requests: it inflates gzip and deflate bodies and decodes charsets
// (utf-16le and more) by default. It trusts any requestState it gets,
// echoing it in its result, and answers a first round with a plaintext
// state. Prints its URL on stdout.
import express from "express";

const app = express();
app.use(express.json({ type: () => true }));
app.all("/{*any}", (req, res) => {
  const msg = req.body || {};
  const state = msg.params && msg.params.requestState;
  const result = state
    ? { content: [{ type: "text", text: "got " + state }] }
    : { resultType: "input_required", inputRequests: {}, requestState: "plain:express" };
  res.json({ jsonrpc: "2.0", id: msg.id ?? null, result });
});
const server = app.listen(0, "127.0.0.1", () => {
  console.log("lenient upstream at http://127.0.0.1:" + server.address().port);
});
