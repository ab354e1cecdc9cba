// Reads the SSE answer to a tools/call as the TypeScript SDK's client
// does (TextDecoderStream, then eventsource-parser's
// EventSourceParserStream), and prints each event's data on a line
// "DATA ...". The suite's node_modules (conformance/, npm ci) has the
// parser. Usage: node sse-client.cjs URL
const path = require("path");
const { EventSourceParserStream } = require(
  path.join(__dirname, "../../../conformance/node_modules/eventsource-parser/dist/stream.cjs"),
);

async function main() {
  const r = await fetch(process.argv[2], {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "book" } }),
  });
  console.log("STATUS " + r.status);
  const events = r.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const ev of events) console.log("DATA " + ev.data);
}
main().catch((e) => {
  console.log("ERROR " + e);
});
