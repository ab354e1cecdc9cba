// An MCP server on the official TypeScript SDK (@modelcontextprotocol/server)
// with the fixtures the conformance suite's input-required scenarios call,
// the same tools, keys and texts as examples/mcpserver. Like most servers
// written today, it does NOT protect its requestState: it trusts whatever
// string comes back. conformance/run.sh runs the suite against it directly
// (it fails tampered-state) and behind sealgate (it passes);
// internal/clients' TestTypeScriptClientTSServer runs the TypeScript
// client at its default protocol (2025-11-25) through sealgate's bridge
// in front of it.
//
// Node.js 22 runs this file as it is (type stripping: only erasable
// TypeScript syntax here):
//
//   node server.ts [--port 0]     prints "MCP server at http://127.0.0.1:PORT/mcp"

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

import {
    McpServer,
    MissingRequiredClientCapabilityError,
    acceptedContent,
    createMcpHandler,
    inputRequired,
    inputResponse,
    type CallToolResult,
    type InputRequest,
    type InputRequiredResult,
    type ServerContext
} from '@modelcontextprotocol/server';

type ToolResult = CallToolResult | InputRequiredResult;

const text = (t: string): CallToolResult => ({ content: [{ type: 'text', text: t }] });

const object = (field: string, type: string) => ({
    type: 'object' as const,
    properties: { [field]: { type } },
    required: [field]
});

const askName = (message: string): InputRequest =>
    inputRequired.elicit({ message, requestedSchema: object('name', 'string') as never });

const askSampling = (prompt: string, maxTokens: number): InputRequest =>
    inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });

// The client's declared capabilities, from the request's _meta envelope.
function clientCaps(ctx: ServerContext): Record<string, unknown> {
    const env = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
    const caps = env['io.modelcontextprotocol/clientCapabilities'] ?? env.clientCapabilities;
    return (caps ?? {}) as Record<string, unknown>;
}

function sampledText(ctx: ServerContext, key: string): string | undefined {
    const view = inputResponse(ctx.mcpReq.inputResponses, key);
    if (view.kind !== 'sampling') return undefined;
    const blocks = Array.isArray(view.result.content) ? view.result.content : [view.result.content];
    for (const b of blocks as Array<{ type?: string; text?: string }>) {
        if (b.type === 'text' && typeof b.text === 'string') return b.text;
    }
    return '(non-text response)';
}

function rootsOf(ctx: ServerContext, key: string): Array<{ uri: string }> | undefined {
    const view = inputResponse(ctx.mcpReq.inputResponses, key);
    return view.kind === 'roots' ? view.roots : undefined;
}

// The state the confirmation tools issue. This server reads it back
// without checking it: a client can send anything, and it is believed.
const pendingConfirm = '{"step":"confirm","fixture":"v1"}';

function confirmRound(ctx: ServerContext, done: string): ToolResult {
    if (acceptedContent(ctx.mcpReq.inputResponses, 'confirm') !== undefined) {
        const state = ctx.mcpReq.requestState<string>();
        return text(`${done} (state ${state ?? 'none'})`);
    }
    return inputRequired({
        inputRequests: { confirm: inputRequired.elicit({ message: 'Please confirm', requestedSchema: object('ok', 'boolean') as never }) },
        requestState: pendingConfirm
    });
}

function buildServer(): McpServer {
    const server = new McpServer({ name: 'stateseal-ts-fixtures', version: '1.0.0' });
    const tool = (name: string, description: string, cb: (ctx: ServerContext) => ToolResult | Promise<ToolResult>) =>
        server.registerTool(name, { description }, cb);

    tool('test_input_required_result_elicitation', 'asks for the caller\'s name by elicitation', ctx => {
        const name = acceptedContent<{ name?: unknown }>(ctx.mcpReq.inputResponses, 'user_name')?.name;
        if (typeof name === 'string' && name !== '') return text(`Hello, ${name}!`);
        return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    });

    tool('test_input_required_result_sampling', 'asks for an LLM completion by sampling', ctx => {
        const t = sampledText(ctx, 'capital_question');
        if (t !== undefined) return text(`Sampling response: ${t}`);
        return inputRequired({ inputRequests: { capital_question: askSampling('What is the capital of France?', 100) } });
    });

    tool('test_input_required_result_list_roots', 'asks for the client\'s roots', ctx => {
        const roots = rootsOf(ctx, 'client_roots');
        if (roots !== undefined) return text(`Client exposed ${roots.length} root(s): ${roots.map(r => r.uri).join(', ')}`);
        return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    });

    tool('test_input_required_result_request_state', 'round-trips a requestState', ctx =>
        confirmRound(ctx, 'state-ok: requestState received and confirmation accepted'));

    tool('test_input_required_result_tampered_state', 'round-trips a requestState it does not verify', ctx =>
        confirmRound(ctx, 'state-ok: requestState accepted'));

    tool('test_input_required_result_multiple_inputs', 'asks for elicitation, sampling and roots in one round', ctx => {
        const name = acceptedContent<{ name?: unknown }>(ctx.mcpReq.inputResponses, 'user_name')?.name;
        const greeting = sampledText(ctx, 'greeting');
        const roots = rootsOf(ctx, 'client_roots');
        if (typeof name === 'string' && greeting !== undefined && roots !== undefined && ctx.mcpReq.requestState<string>() === 'multiple_inputs') {
            return text(`${greeting} ${name} — ${roots.length} root(s) visible`);
        }
        return inputRequired({
            inputRequests: {
                user_name: askName('What is your name?'),
                greeting: askSampling('Generate a greeting', 50),
                client_roots: inputRequired.listRoots()
            },
            requestState: 'multiple_inputs'
        });
    });

    tool('test_input_required_result_multi_round', 'two elicitation rounds, the state carried by the client', ctx => {
        const raw = ctx.mcpReq.requestState<string>();
        const st: { round?: number; name?: string } = raw ? JSON.parse(raw) : {};
        switch (st.round ?? 0) {
            case 0:
                return inputRequired({ inputRequests: { step1: askName('Step 1: What is your name?') }, requestState: JSON.stringify({ round: 1 }) });
            case 1: {
                const name = acceptedContent<{ name?: unknown }>(ctx.mcpReq.inputResponses, 'step1')?.name;
                return inputRequired({
                    inputRequests: {
                        step2: inputRequired.elicit({ message: 'Step 2: What is your favorite color?', requestedSchema: object('color', 'string') as never })
                    },
                    requestState: JSON.stringify({ round: 2, name: typeof name === 'string' && name ? name : 'unknown' })
                });
            }
            default: {
                const color = acceptedContent<{ color?: unknown }>(ctx.mcpReq.inputResponses, 'step2')?.color;
                return text(`Multi-round complete: ${st.name} likes ${typeof color === 'string' && color ? color : 'unknown'}`);
            }
        }
    });

    tool('test_input_required_result_capabilities', 'asks only for input kinds the client declared', ctx => {
        const responses = ctx.mcpReq.inputResponses;
        if (responses && Object.keys(responses).length > 0) return text('Capability-aware input requests fulfilled');
        const caps = clientCaps(ctx);
        const asks: Record<string, InputRequest> = {};
        if (caps.elicitation !== undefined) asks.user_name = askName('What is your name?');
        if (caps.sampling !== undefined) asks.greeting = askSampling('Generate a short greeting', 50);
        if (caps.roots !== undefined) asks.client_roots = inputRequired.listRoots();
        if (Object.keys(asks).length === 0) return text('No declared client capability supports an in-band input request');
        return inputRequired({ inputRequests: asks });
    });

    tool('test_missing_capability', 'requires sampling; answers -32021 without it', ctx => {
        const caps = clientCaps(ctx);
        if (caps.sampling === undefined) {
            throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { sampling: {} } });
        }
        return text('Client declared the sampling capability; tool executed.');
    });

    server.registerPrompt('test_input_required_result_prompt', { description: 'asks for context by elicitation' }, ctx => {
        const c = acceptedContent<{ context?: unknown }>(ctx.mcpReq.inputResponses, 'user_context');
        if (c !== undefined) {
            return {
                description: 'A prompt with elicited context',
                messages: [{ role: 'user', content: { type: 'text', text: `Context: ${String(c.context)}` } }]
            };
        }
        return inputRequired({
            inputRequests: {
                user_context: inputRequired.elicit({ message: 'Please provide context for the prompt', requestedSchema: object('context', 'string') as never })
            }
        });
    });
    return server;
}

const handler = createMcpHandler(() => buildServer());

// node:http in front of the SDK's web-standard handler.
async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach(x => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, {
        method: req.method,
        headers,
        body: hasBody ? (Readable.toWeb(req) as ReadableStream) : undefined,
        // @ts-expect-error: Node's fetch needs duplex for a streamed body.
        duplex: 'half'
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
            res.write(chunk);
        }
    }
    res.end();
}

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;
const httpServer = createServer((req, res) => {
    serve(req, res).catch(err => {
        console.error(err);
        if (!res.headersSent) res.writeHead(500);
        res.end();
    });
});
httpServer.listen(port, '127.0.0.1', () => {
    const addr = httpServer.address();
    if (addr && typeof addr === 'object') console.log(`stateseal TS fixtures: MCP server at http://127.0.0.1:${addr.port}/mcp`);
});
const stop = () => httpServer.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
