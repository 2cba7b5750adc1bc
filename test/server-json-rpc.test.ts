// Protocol misuse over real HTTP, answered with the JSON-RPC 2.0 error the spec names, on both transports:
// an empty batch and valid JSON that is not JSON-RPC are -32600 Invalid Request, a request whose params do
// not fit its method is -32602 Invalid params naming the field — never the SDK's defaults (202 with no
// body, -32700 Parse error, -32603 Internal error with a zod dump).
import { createSessionPool } from '@klym/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { startKlymServer, type RunningKlymServer } from '../apps/server/src/server/index.ts';
import { quickRunner } from './support/server-runners.ts';

let server: RunningKlymServer;
beforeAll(async () => {
  const pool = await createSessionPool({ upstreams: {} });
  server = await startKlymServer({ port: 0, pool, tasks: { run: quickRunner, shutdownGraceMs: 0 }, log: () => {} });
  return async () => {
    await server.close();
    await pool.close();
  };
});

const PROTOCOL = '2025-06-18';
const initialize = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'grynya', version: '1.0.0' } },
};
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };

/** The malformed `tools/call`s of issue #11, each with the field its answer must name. */
const MALFORMED_CALLS: readonly (readonly [string, Record<string, unknown>, RegExp])[] = [
  ['no params', { jsonrpc: '2.0', id: 11, method: 'tools/call' }, /^Invalid params for tools\/call: `params`: missing \(expected object\)$/],
  ['no name', { jsonrpc: '2.0', id: 12, method: 'tools/call', params: { arguments: {} } }, /`params\.name`: missing \(expected string\)/],
  ['name: 7', { jsonrpc: '2.0', id: 13, method: 'tools/call', params: { name: 7 } }, /`params\.name`: expected string, received number/],
  [
    'arguments: "x"',
    { jsonrpc: '2.0', id: 14, method: 'tools/call', params: { name: 'describe_capabilities', arguments: 'x' } },
    /`params\.arguments`: expected object, received string/,
  ],
];

/** Bodies that are JSON but not JSON-RPC, each with what the answer must say. */
const NOT_JSON_RPC: readonly (readonly [string, unknown, RegExp])[] = [
  ['an empty batch', [], /^Invalid Request: an empty batch/],
  // Every field checked by hand is fine, but the spec types `_meta`: the SDK's schema still has the last word.
  [
    'a progressToken that is an object',
    { jsonrpc: '2.0', id: 15, method: 'tools/call', params: { name: 'describe_capabilities', arguments: {}, _meta: { progressToken: {} } } },
    /^Invalid Request: not a JSON-RPC 2\.0 request/,
  ],
  ['an object of another protocol', { hello: 'world' }, /^Invalid Request: `jsonrpc` must be "2\.0"$/],
  ['a number', 42, /^Invalid Request: expected a JSON-RPC 2\.0 message object, got number$/],
  ['a method that is not a string', { jsonrpc: '2.0', id: 1, method: 7 }, /^Invalid Request: `method` must be a string$/],
  [
    'a batch with a bad element',
    [{ jsonrpc: '2.0', id: 1, method: 'ping' }, 1],
    /^Invalid Request: batch item 1: expected a JSON-RPC 2\.0 message object, got number$/,
  ],
];

describe('Streamable HTTP (/mcp)', () => {
  let headers: Record<string, string>;
  beforeAll(async () => {
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const opened = await fetch(server.mcpUrl, { method: 'POST', headers: base, body: JSON.stringify(initialize) });
    await opened.text();
    headers = { ...base, 'mcp-session-id': opened.headers.get('mcp-session-id') ?? '', 'mcp-protocol-version': PROTOCOL };
    must((await fetch(server.mcpUrl, { method: 'POST', headers, body: JSON.stringify(initialized) })).status === 202, 'the session opens');
  });
  const post = (body: unknown): Promise<Response> => fetch(server.mcpUrl, { method: 'POST', headers, body: JSON.stringify(body) });

  it.each(NOT_JSON_RPC)('answers %s with one -32600 Invalid Request (HTTP 400), not the SDK default', async (_, body, message) => {
    const response = await post(body);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ jsonrpc: '2.0', error: { code: -32600, message: expect.stringMatching(message) }, id: null });
  });

  it('still answers a body that is not JSON at all with -32700 Parse error', async () => {
    const response = await fetch(server.mcpUrl, { method: 'POST', headers, body: '{"jsonrpc": "2.0", "id": 1, "method":' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: -32700 }, id: null });
  });

  it.each(MALFORMED_CALLS)(
    'answers a tools/call with %s with -32602 Invalid params naming the field, as the request’s JSON answer',
    async (_, call, message) => {
      const response = await post(call);
      expect(response.status).toBe(200);
      const answer: unknown = await response.json();
      expect(answer).toEqual({ jsonrpc: '2.0', id: call.id, error: { code: -32602, message: expect.stringMatching(message) } });
      expect(JSON.stringify(answer)).not.toContain('invalid_type');
    },
  );

  it('answers each request of a batch: the malformed call with -32602, the good one with its result', async () => {
    const response = await post([MALFORMED_CALLS[2]?.[1], { jsonrpc: '2.0', id: 21, method: 'tools/list' }]);
    const answers: unknown = await response.json();
    expect(answers).toContainEqual(expect.objectContaining({ id: 13, error: expect.objectContaining({ code: -32602 }) }));
    expect(answers).toContainEqual(expect.objectContaining({ id: 21, result: expect.objectContaining({ tools: expect.any(Array) }) }));
  });

  it('answers each request with one JSON body, and a long session does not grow with the requests it was answered', async () => {
    const session = server.klym.sessions.use(headers['mcp-session-id'] ?? '', 'streamable-http', 'anonymous');
    if (session === undefined) throw new Error('Set-up failed: expected the session to be open');
    // The transport's map of open answer streams (private): SDK 1.32 left each JSON answer's entry there for the
    // session's life (modelcontextprotocol/typescript-sdk#2559); the v2 SDK must not.
    const streams = Reflect.get(session.transport, '_streamMapping') as Map<string, unknown>;
    const before = streams.size;
    for (let id = 100; id < 150; id++) {
      const response = await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'check_task_status', arguments: { task_id: 'no-such-task' } } });
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await response.json()).toMatchObject({ jsonrpc: '2.0', id, result: { isError: true } });
    }
    expect(streams.size).toBe(before);
  });
});

describe('legacy SSE (/sse + /messages)', () => {
  let stream: SseReader;
  let endpoint: string;
  beforeAll(async () => {
    stream = await openSse(server.sseUrl);
    endpoint = new URL(await stream.next('endpoint'), server.url).href;
    must((await postTo(endpoint, initialize)).status === 202, 'initialize is accepted');
    must((JSON.parse(await stream.next('message')) as { id?: number }).id === 0, 'initialize is answered on the stream');
    must((await postTo(endpoint, initialized)).status === 202, 'the session opens');
    return () => stream.close();
  });

  it.each(NOT_JSON_RPC)('answers %s as the HTTP response: one -32600 Invalid Request (400), as the SDK answers a bad POST', async (_, body, message) => {
    const response = await postTo(endpoint, body);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ jsonrpc: '2.0', error: { code: -32600, message: expect.stringMatching(message) }, id: null });
  });

  it.each(MALFORMED_CALLS)('answers a tools/call with %s with -32602 Invalid params on the SSE stream, where its client waits', async (_, call, message) => {
    expect((await postTo(endpoint, call)).status).toBe(202);
    expect(JSON.parse(await stream.next('message'))).toEqual({ jsonrpc: '2.0', id: call.id, error: { code: -32602, message: expect.stringMatching(message) } });
  });

  it('takes a batch, its answers coming on the stream one by one', async () => {
    expect(
      (
        await postTo(endpoint, [
          { jsonrpc: '2.0', id: 31, method: 'ping' },
          { jsonrpc: '2.0', id: 32, method: 'tools/list' },
        ])
      ).status,
    ).toBe(202);
    const answers = [JSON.parse(await stream.next('message')), JSON.parse(await stream.next('message'))] as { id: number }[];
    expect(answers.map((answer) => answer.id).toSorted()).toEqual([31, 32]);
  });
});

/** Set-up that must hold for the tests to mean anything. */
function must(condition: boolean, what: string): void {
  if (!condition) throw new Error(`Set-up failed: expected ${what}`);
}

const postTo = (url: string, body: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

interface SseReader {
  /** The data of the next event named `event`, skipping others. */
  next(event: string): Promise<string>;
  close(): Promise<void>;
}

/** A legacy SSE stream read with fetch: its events one at a time. */
async function openSse(url: string): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: controller.signal });
  const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  return {
    async next(event) {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const name = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
          if (name === event) return /^data: (.*)$/m.exec(block)?.[1] ?? '';
          continue;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error(`The SSE stream ended before an "${event}" event`);
        buffer += value;
      }
    },
    async close() {
      controller.abort();
      await reader.cancel().catch(() => {});
    },
  };
}
