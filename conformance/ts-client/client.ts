// Drives input-required flows with the official TypeScript SDK's client
// (@modelcontextprotocol/client), through its own high-level API
// (Client.callTool, which answers the input requests and retries itself),
// and prints, one JSON line each, what its caller gets. internal/clients'
// TestTypeScriptClient starts the servers, runs this file and checks the
// lines:
//
//   node client.ts '{"targets":[{"name":"server","url":...,"unavailable":...,"expired":...}]}'
//
// With "fixtures" (TestTypeScriptClientTSServer), it calls every fixture
// of conformance/ts-server at each URL at the SDK's default protocol, and
// prints with each result what the client was asked and what it saw on
// the wire:
//
//   node client.ts '{"fixtures":[{"name":"ts-gateway","url":...}]}'
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

function report(target: string, kase: string, out: { text?: string; error?: unknown }, extra: Record<string, unknown> = {}) {
    const line: Record<string, unknown> = { target, case: kase, ...extra };
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

// The capabilities a client declares, each with its handler.
type Kinds = Partial<Record<'elicitation' | 'sampling' | 'roots', object>>;

// The keys of the 2026-07-28 input-required vocabulary, which a client of
// an earlier protocol must never be sent.
const mrtrKeys = ['requestState', 'inputRequests', 'inputResponses'];

// mrtrIn lists where msg (a parsed JSON-RPC message, or anything under
// it) holds one of mrtrKeys, or a resultType of input_required.
function mrtrIn(msg: unknown, path = '$'): string[] {
    if (msg === null || typeof msg !== 'object') return [];
    const found: string[] = [];
    for (const [k, v] of Object.entries(msg)) {
        if (mrtrKeys.includes(k) || (k === 'resultType' && v === 'input_required')) found.push(`${path}.${k}`);
        found.push(...mrtrIn(v, `${path}.${k}`));
    }
    return found;
}

// messages parses a body the client received: JSON (a message or a
// batch), or SSE events whose data are JSON. What does not parse is
// returned as text.
function messages(contentType: string, body: string): { parsed: unknown[]; unparsed: string[] } {
    const parsed: unknown[] = [];
    const unparsed: string[] = [];
    const one = (text: string) => {
        try {
            const v = JSON.parse(text);
            parsed.push(...(Array.isArray(v) ? v : [v]));
        } catch {
            unparsed.push(text);
        }
    };
    if (contentType.includes('text/event-stream')) {
        for (const event of body.split(/\r?\n\r?\n/)) {
            const data = event
                .split(/\r?\n/)
                .filter(l => l.startsWith('data:'))
                .map(l => l.slice(5).replace(/^ /, ''));
            if (data.length > 0 && data.join('') !== '') one(data.join('\n'));
        }
    } else if (body.trim() !== '') {
        one(body);
    }
    return { parsed, unparsed };
}

// A wire is a fetch that keeps a copy of everything the client sends and
// receives, read to its end (or to the stream's abort) by done().
function wire() {
    const sent: string[] = [];
    const received: Array<Promise<{ contentType: string; body: string }>> = [];
    const read = async (r: Response) => {
        const contentType = r.headers.get('content-type') ?? '';
        let body = '';
        if (r.body) {
            const reader = r.body.getReader();
            const dec = new TextDecoder();
            try {
                for (let c = await reader.read(); !c.done; c = await reader.read()) body += dec.decode(c.value, { stream: true });
            } catch {
                // The client closed the stream: what came before counts.
            }
        }
        return { contentType, body };
    };
    const f = async (url: string | URL, init?: RequestInit): Promise<Response> => {
        if (init && typeof init.body === 'string') sent.push(init.body);
        const r = await fetch(url, init);
        received.push(read(r.clone()));
        return r;
    };
    // done: the 2026-07-28 vocabulary found in what the client sent and
    // received, and the input requests that came over the wire.
    const done = async () => {
        const leaks: string[] = [];
        const asked: Record<string, number> = {};
        for (const body of sent) {
            for (const m of messages('application/json', body).parsed) leaks.push(...mrtrIn(m).map(p => `sent ${p}`));
        }
        for (const { contentType, body } of await Promise.all(received)) {
            const { parsed, unparsed } = messages(contentType, body);
            for (const m of parsed) {
                leaks.push(...mrtrIn(m).map(p => `received ${p}`));
                const method = (m as { method?: unknown; id?: unknown }).method;
                if (typeof method === 'string' && (m as { id?: unknown }).id !== undefined) asked[method] = (asked[method] ?? 0) + 1;
            }
            for (const u of unparsed) if (mrtrKeys.some(k => u.includes(k))) leaks.push(`received, not JSON: ${u.slice(0, 200)}`);
        }
        return { leaks, wire: asked };
    };
    return { fetch: f, done };
}

// fixture calls one fixture of conformance/ts-server (a tool, or the
// prompt) at the SDK's default protocol, with handlers for the
// capabilities the client declares (all three unless told), each
// answering as call's do, and counting what it answered.
async function fixture(url: string, name: string, caps: Kinds = { elicitation: {}, sampling: {}, roots: {} }) {
    const client = new Client({ name: 'stateseal-clients', version: '1' }, { capabilities: caps });
    const handled: Record<string, number> = {};
    const count = (m: string) => (handled[m] = (handled[m] ?? 0) + 1);
    if (caps.elicitation) {
        client.setRequestHandler('elicitation/create', async request => {
            count('elicitation/create');
            return { action: 'accept' as const, content: answer(request.params) };
        });
    }
    if (caps.sampling) {
        client.setRequestHandler('sampling/createMessage', async () => {
            count('sampling/createMessage');
            return { role: 'assistant' as const, model: 'm', content: { type: 'text' as const, text: 'Hi' } };
        });
    }
    if (caps.roots) {
        client.setRequestHandler('roots/list', async () => {
            count('roots/list');
            return { roots: [{ uri: 'file:///r', name: 'r' }] };
        });
    }
    const w = wire();
    const out: { text?: string; error?: unknown } = {};
    let protocol: string | undefined;
    try {
        await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: w.fetch }));
        protocol = client.getNegotiatedProtocolVersion();
        if (name.endsWith('_prompt')) {
            const res = await client.getPrompt({ name, arguments: {} });
            const m = res.messages[0]?.content as { type: string; text?: string } | undefined;
            out.text = m?.type === 'text' ? m.text : undefined;
        } else {
            const res = await client.callTool({ name, arguments: {} });
            const text = (res.content as Array<{ type: string; text?: string }> | undefined)?.find(c => c.type === 'text')?.text;
            if (res.isError) throw new Error(`tool error: ${text}`);
            out.text = text ?? '';
        }
    } catch (error) {
        out.error = error;
    } finally {
        await client.close();
    }
    return { out, protocol, handled, ...(await w.done()) };
}

// The fixtures conformance/ts-server has, in the order the suite's
// scenarios name them.
const tsFixtures = [
    'test_input_required_result_elicitation',
    'test_input_required_result_sampling',
    'test_input_required_result_list_roots',
    'test_input_required_result_request_state',
    'test_input_required_result_tampered_state',
    'test_input_required_result_multiple_inputs',
    'test_input_required_result_multi_round',
    'test_input_required_result_capabilities',
    'test_missing_capability',
    'test_input_required_result_prompt'
];

const config = JSON.parse(process.argv[2]) as { targets?: Target[]; fixtures?: Array<{ name: string; url: string }> };
for (const t of config.fixtures ?? []) {
    const cases: Array<[string, string, Kinds?]> = tsFixtures.map(f => [f.replace(/^test_(input_required_result_)?/, ''), f]);
    // With fewer capabilities: the upstream asks only for what the client
    // declared, or answers its own error, which reaches the client as it
    // sent it.
    cases.push(['capabilities_elicitation_only', 'test_input_required_result_capabilities', { elicitation: {} }]);
    cases.push(['sampling_undeclared', 'test_input_required_result_sampling', { elicitation: {}, roots: {} }]);
    cases.push(['missing_capability_undeclared', 'test_missing_capability', { elicitation: {}, roots: {} }]);
    for (const [kase, name, caps] of cases) {
        const r = await fixture(t.url, name, caps);
        const line = { protocol: r.protocol, handled: r.handled, wire: r.wire, leaks: r.leaks };
        report(t.name, kase, r.out, line);
    }
}
for (const t of config.targets ?? []) {
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
