// Drives input-required flows with the official TypeScript SDK's client
// (@modelcontextprotocol/client), through its own high-level API
// (Client.callTool, which answers the input requests and retries itself),
// and prints, one JSON line each, what its caller gets. internal/clients'
// TestTypeScriptClient starts the servers, runs this file and checks the
// lines:
//
//   node client.ts '{"targets":[{"name":"server","url":...,"unavailable":...,"expired":...}]}'
//
// Node.js 22 runs this file as it is (type stripping: only erasable
// TypeScript syntax here).

import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

type Target = { name: string; url: string; unavailable: string; expired: string };

// rewrite, when set, is handed every requestState the client sends and
// may change it, as a client or a network in the middle would.
let rewrite: ((s: string) => string) | undefined;

const rewritingFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    if (rewrite && init && typeof init.body === 'string') {
        const msg = JSON.parse(init.body);
        if (msg && msg.params && typeof msg.params.requestState === 'string') {
            msg.params.requestState = rewrite(msg.params.requestState);
            init = { ...init, body: JSON.stringify(msg) };
        }
    }
    return fetch(url, init);
};

// answer fills every property a form asks for: true for a boolean, "Ada"
// for anything else.
function answer(params: unknown): Record<string, string | boolean> {
    const schema = (params as { requestedSchema?: { properties?: Record<string, { type?: string }> } }).requestedSchema;
    const out: Record<string, string | boolean> = {};
    for (const [k, v] of Object.entries(schema?.properties ?? {})) out[k] = v.type === 'boolean' ? true : 'Ada';
    return out;
}

// The protocol a call negotiates: 'auto' or pinned to 2026-07-28, as a
// TypeScript user must for input_required, or the SDK's default (legacy:
// 2025-11-25).
type Negotiation = 'auto' | 'pin' | 'default';

// call runs one tool call on a new connection.
async function call(url: string, tool: string, n: number, negotiation: Negotiation = 'auto'): Promise<string> {
    const versionNegotiation =
        negotiation === 'auto' ? { mode: 'auto' as const } : negotiation === 'pin' ? { mode: { pin: '2026-07-28' } } : undefined;
    const client = new Client(
        { name: 'stateseal-clients', version: '1' },
        { capabilities: { elicitation: {}, sampling: {}, roots: {} }, versionNegotiation }
    );
    client.setRequestHandler('elicitation/create', async request => ({ action: 'accept' as const, content: answer(request.params) }));
    client.setRequestHandler('sampling/createMessage', async () => ({
        role: 'assistant' as const,
        model: 'm',
        content: { type: 'text' as const, text: 'Hi' }
    }));
    client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///r', name: 'r' }] }));
    const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: rewritingFetch });
    await client.connect(transport);
    try {
        const res = await client.callTool({ name: tool, arguments: { n } });
        const text = (res.content as Array<{ type: string; text?: string }> | undefined)?.find(c => c.type === 'text')?.text;
        if (res.isError) throw new Error(`tool error: ${text}`);
        return text ?? '';
    } finally {
        await client.close();
    }
}

function report(target: string, kase: string, out: { text?: string; error?: unknown }) {
    const line: Record<string, unknown> = { target, case: kase };
    if (out.error !== undefined) {
        const e = out.error as { code?: unknown; data?: unknown; message?: unknown };
        line.error = {
            class: out.error instanceof ProtocolError ? 'ProtocolError' : (out.error as object)?.constructor?.name,
            code: e.code,
            message: e.message,
            data: e.data,
            text: String(out.error)
        };
    } else {
        line.text = out.text;
    }
    console.log(JSON.stringify(line));
}

async function run(target: string, kase: string, f: () => Promise<string>) {
    try {
        report(target, kase, { text: await f() });
    } catch (error) {
        report(target, kase, { error });
    } finally {
        rewrite = undefined;
    }
}

const flip = (s: string) => s.slice(0, 10) + (s[10] === 'A' ? 'B' : 'A') + s.slice(11);

const config = JSON.parse(process.argv[2]) as { targets: Target[] };
for (const t of config.targets) {
    await run(t.name, 'fleet_flow', () => call(t.url, 'fleet_flow', 1));
    await run(t.name, 'elicitation', () => call(t.url, 'test_input_required_result_elicitation', 0));
    await run(t.name, 'multi_round', () => call(t.url, 'test_input_required_result_multi_round', 0));
    let used = '';
    rewrite = s => (used = s);
    await run(t.name, 'fleet_pay', () => call(t.url, 'fleet_pay', 7));
    rewrite = flip;
    await run(t.name, 'invalid', () => call(t.url, 'fleet_flow', 1));
    rewrite = () => t.expired;
    await run(t.name, 'expired', () => call(t.url, 'fleet_flow', 1));
    rewrite = () => used;
    await run(t.name, 'replayed', () => call(t.url, 'fleet_pay', 7));
    await run(t.name, 'unavailable', () => call(t.unavailable, 'fleet_pay', 8));
    await run(t.name, 'pinned', () => call(t.url, 'fleet_flow', 1, 'pin'));
    await run(t.name, 'default_protocol', () => call(t.url, 'fleet_flow', 1, 'default'));
    // Every input-required fixture at the SDK's default protocol
    // (2025-11-25): through sealgate's bridge, each completes.
    for (const f of ['elicitation', 'request_state', 'multi_round', 'sampling', 'list_roots', 'multiple_inputs', 'tampered_state']) {
        await run(t.name, `default_${f}`, () => call(t.url, `test_input_required_result_${f}`, 0, 'default'));
    }
    await run(t.name, 'default_fleet_pay', () => call(t.url, 'fleet_pay', 9, 'default'));
}
