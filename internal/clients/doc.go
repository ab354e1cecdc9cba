// Package clients holds the tests of what the official MCP client
// libraries show their callers when a state is refused: the go-sdk's and
// mcp-go's clients (Go tests) and the TypeScript SDK's
// (@modelcontextprotocol/client, through Node.js: conformance/ts-client),
// each through its own high-level API, against examples/mcpserver and
// against cmd/sealgate in front of it, both run as processes; and the
// TypeScript client at its default protocol (2025-11-25) through
// sealgate's bridge in front of the TypeScript SDK's own server
// (conformance/ts-server).
package clients
