// An MCP server on the official TypeScript SDK (@modelcontextprotocol/server)
// whose tools pay and refund ask for a confirmation and keep a state
// between the rounds, for statescan's tests:
//
//   node server.ts --port 0 --codec off    the state is plain JSON, trusted as it comes back
//   node server.ts --port 0 --codec on     the SDK's createRequestStateCodec, as shipped (no bind)
//   node server.ts --port 0 --codec bind   the codec with the binding its docs suggest:
//                                          the method and the principal (the X-User header)
//
// Each prints "MCP server at http://127.0.0.1:PORT/mcp". Node.js 22 runs
// this file as it is (type stripping).

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

import {
    McpServer,
    acceptedContent,
    createMcpHandler,
    createRequestStateCodec,
    inputRequired,
    type CallToolResult,
    type InputRequiredResult,
    type ServerContext
} from '@modelcontextprotocol/server';

const arg = (name: string, dflt: string): string => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : dflt;
};
const mode = arg('--codec', 'off');
const port = Number(arg('--port', '0'));

type State = { step: string };

const principal = (ctx: ServerContext): string => ctx.http?.req?.headers.get('x-user') ?? '';

const codec =
    mode === 'off'
        ? undefined
        : createRequestStateCodec<State>({
              key: crypto.getRandomValues(new Uint8Array(32)),
              ttlSeconds: 600,
              bind: mode === 'bind' ? ctx => `${ctx.mcpReq.method}\0${principal(ctx)}` : undefined
          });

async function pay(name: string, ctx: ServerContext): Promise<CallToolResult | InputRequiredResult> {
    const ok = acceptedContent<{ ok?: unknown }>(ctx.mcpReq.inputResponses, 'confirm')?.ok === true;
    const raw = ctx.mcpReq.requestState<State | string>();
    const state: State | undefined = typeof raw === 'string' ? JSON.parse(raw) : raw;
    if (ok && state?.step === 'confirm') return { content: [{ type: 'text', text: `${name}: done` }] };
    const fresh: State = { step: 'confirm' };
    return inputRequired({
        inputRequests: {
            confirm: inputRequired.elicit({
                message: `${name}?`,
                requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } as never
            })
        },
        requestState: codec ? await codec.mint(fresh, ctx) : JSON.stringify(fresh)
    });
}

function buildServer(): McpServer {
    const server = new McpServer(
        { name: 'statescan-ts-holes', version: '1.0.0' },
        codec ? { requestState: { verify: codec.verify } } : undefined
    );
    for (const name of ['pay', 'refund']) {
        server.registerTool(name, { description: `${name}, after a confirmation` }, ctx => pay(name, ctx));
    }
    return server;
}

const handler = createMcpHandler(() => buildServer());

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
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
    }
    res.end();
}

const httpServer = createServer((req, res) => {
    serve(req, res).catch(err => {
        console.error(err);
        if (!res.headersSent) res.writeHead(500);
        res.end();
    });
});
httpServer.listen(port, '127.0.0.1', () => {
    const addr = httpServer.address();
    if (addr && typeof addr === 'object') console.log(`statescan TS holes (codec ${mode}): MCP server at http://127.0.0.1:${addr.port}/mcp`);
});
const stop = () => httpServer.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
