import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MESSAGE_TOO_LARGE_CODE, type MessageLimit, type OversizedMessage } from './message-limit.ts';
import { createUpstreamFetch, type UpstreamFetch } from './upstream-fetch.ts';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** A loopback server answering each request with `answer`; records what it was sent and how many connections it got. */
async function serve(answer: (seen: Seen, response: ServerResponse) => void) {
  const seen: Seen[] = [];
  let connections = 0;
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const entry = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body };
      seen.push(entry);
      answer(entry, response);
    });
  });
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, connections: () => connections };
}

function upstreamFetch(host?: string, limit?: MessageLimit): UpstreamFetch['fetch'] {
  const created = createUpstreamFetch(host, limit);
  cleanups.push(() => created.close());
  return created.fetch;
}

/** What the SDK's transports send: a JSON-RPC message, with its headers in a `Headers`. */
const message = (headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: new Headers({ 'content-type': 'application/json', ...headers }),
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  redirect: 'manual',
});

describe('createUpstreamFetch', () => {
  it('POSTs a message with its headers, the Host override and the defaults fetch adds, and answers what the SDK reads', async () => {
    const upstream = await serve((_, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'session-1' });
      response.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    });
    const fetch = upstreamFetch('grynya.internal');
    const response = await fetch(new URL(`${upstream.url}/mcp`), message({ authorization: 'Bearer t0ken', 'x-trace': 'klym' }));
    expect(upstream.seen[0]).toMatchObject({
      method: 'POST',
      url: '/mcp',
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      headers: { host: 'grynya.internal', authorization: 'Bearer t0ken', 'x-trace': 'klym', 'content-type': 'application/json', accept: '*/*' },
    });
    expect({ status: response.status, ok: response.ok, session: response.headers.get('mcp-session-id') }).toEqual({
      status: 200,
      ok: true,
      session: 'session-1',
    });
    expect(await response.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
  });

  it('answers a 202 with no body to cancel, and reads the real one to its end, so its connection is kept, not cut', async () => {
    const ended = { finished: 0, cut: 0 };
    const upstream = await serve((_, response) => {
      response.on('close', () => (response.writableFinished ? ended.finished++ : ended.cut++));
      // The body's end comes after its head, as it may on a real network.
      response.writeHead(202, { 'content-length': '8' });
      response.write('Accep');
      setTimeout(() => response.end('ted'), 2);
    });
    const fetch = upstreamFetch(undefined);
    for (let index = 0; index < 20; index++) {
      const response = await fetch(`${upstream.url}/messages/?sessionId=1`, message());
      expect(response.status).toBe(202);
      await response.body?.cancel();
    }
    await vi.waitFor(() => expect(ended.finished + ended.cut).toBe(20));
    // A body cancelled while it arrives costs its connection: a new one, with its handshakes, for the next POST.
    expect(ended).toEqual({ finished: 20, cut: 0 });
    expect(upstream.connections()).toBeLessThan(20);
  });

  it('streams an event-stream answer as it comes', async () => {
    let finish: (() => void) | undefined;
    const upstream = await serve((_, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      response.write('event: message\ndata: {"first":true}\n\n');
      finish = () => response.end('event: message\ndata: {"last":true}\n\n');
    });
    const response = await upstreamFetch(undefined)(`${upstream.url}/mcp`, message());
    const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    // The first event arrives while the upstream still holds the stream open.
    expect((await reader.read()).value).toBe('event: message\ndata: {"first":true}\n\n');
    finish?.();
    expect((await reader.read()).value).toBe('event: message\ndata: {"last":true}\n\n');
    expect((await reader.read()).done).toBe(true);
  });

  it('answers an error status with its body as text, and a redirect unfollowed, with its Location', async () => {
    const upstream = await serve((seen, response) => {
      if (seen.url === '/moved') {
        response.writeHead(307, { location: '/mcp' });
        response.end();
        return;
      }
      response.writeHead(404, { 'content-type': 'text/plain' });
      response.end('Session not found');
    });
    const fetch = upstreamFetch(undefined);
    const missing = await fetch(`${upstream.url}/mcp`, message());
    expect({ status: missing.status, ok: missing.ok, text: await missing.text() }).toEqual({ status: 404, ok: false, text: 'Session not found' });
    const moved = await fetch(`${upstream.url}/moved`, message());
    expect({ status: moved.status, location: moved.headers.get('location') }).toEqual({ status: 307, location: '/mcp' });
    expect(upstream.seen.map((seen) => seen.url)).toEqual(['/mcp', '/moved']);
  });

  it('gives up a POST whose signal aborts, and sends GETs through fetch with the same headers and Host', async () => {
    const upstream = await serve((seen, response) => {
      if (seen.method === 'GET') {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end('event: endpoint\ndata: /messages/\n\n');
      }
      // POSTs are never answered.
    });
    const fetch = upstreamFetch('grynya.internal');
    const controller = new AbortController();
    const hanging = fetch(`${upstream.url}/messages/`, { ...message(), signal: controller.signal });
    controller.abort(new Error('the transport closed'));
    await expect(hanging).rejects.toThrow('the transport closed');

    const stream = await fetch(`${upstream.url}/sse`, { headers: new Headers({ accept: 'text/event-stream', authorization: 'Bearer t0ken' }) });
    expect(await stream.text()).toBe('event: endpoint\ndata: /messages/\n\n');
    expect(upstream.seen.find((seen) => seen.method === 'GET')?.headers).toMatchObject({ host: 'grynya.internal', authorization: 'Bearer t0ken' });
  });
});

/** A fetch whose messages may be 1,000 bytes at most, and the messages it dropped. */
function limited(): { fetch: UpstreamFetch['fetch']; dropped: OversizedMessage[] } {
  const dropped: OversizedMessage[] = [];
  return { fetch: upstreamFetch(undefined, { maxMessageBytes: 1_000, onDropped: (oversized) => dropped.push(oversized) }), dropped };
}

const answer = (id: number, text: string): string => JSON.stringify({ result: { content: [{ type: 'text', text }] }, jsonrpc: '2.0', id });

describe('createUpstreamFetch, its limit on a message', () => {
  it('answers a JSON body over the limit, by its Content-Length or read in chunks, with the error answer to the POST’s request', async () => {
    const upstream = await serve((seen, response) => {
      const body = answer(1, 'x'.repeat(5_000));
      if (seen.url === '/declared') {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        response.end(body);
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      for (let start = 0; start < body.length; start += 300) response.write(body.slice(start, start + 300));
      response.end();
    });
    const { fetch } = limited();
    const declared = await (await fetch(`${upstream.url}/declared`, message())).json();
    expect(declared).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      error: {
        code: MESSAGE_TOO_LARGE_CODE,
        data: { klymMessageTooLarge: { bytes: Buffer.byteLength(answer(1, 'x'.repeat(5_000))), complete: true, limit: 1_000 } },
      },
    });
    const chunked = await (await fetch(`${upstream.url}/chunked`, message())).json();
    expect(chunked).toMatchObject({ id: 1, error: { code: MESSAGE_TOO_LARGE_CODE, data: { klymMessageTooLarge: { bytes: 1_000, complete: false } } } });
  });

  it('passes an SSE stream’s events under the limit, whatever their chunks and line ends; replaces one over it, drops a notification over it', async () => {
    const small = `event: message\r\ndata: ${answer(2, 'small')}\r\n\r\n`;
    const big = `event: message\ndata: ${answer(1, 'y'.repeat(3_000))}\n\n`;
    const note = `event: message\ndata: ${JSON.stringify({ method: 'notifications/message', params: { level: 'info', data: 'z'.repeat(3_000) }, jsonrpc: '2.0' })}\n\n`;
    // Over the limit within its last 512 bytes: its id is read from bytes passed on and bytes skipped.
    const barely = `event: message\ndata: ${answer(3, 'm'.repeat(1_000 - 80))}\n\n`;
    const stream = small + note + big + small + barely;
    const upstream = await serve((_, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let start = 0; start < stream.length; start += 7) response.write(stream.slice(start, start + 7));
      response.end();
    });
    const { fetch, dropped } = limited();
    const text = await (await fetch(`${upstream.url}/mcp`, message())).text();
    const all = text.split(/\r?\n\r?\n/).filter(Boolean);
    // What was passed on of an event over the limit ends as an event nobody listens for, at most the limit.
    const ended = all.filter((event) => event.endsWith('\nevent: klym-dropped'));
    expect(ended).toHaveLength(3);
    for (const event of ended) expect(Buffer.byteLength(event)).toBeLessThanOrEqual(1_000 + '\nevent: klym-dropped'.length);
    const events = all.filter((event) => !ended.includes(event));
    expect(events).toHaveLength(4);
    expect(events[0]).toBe(small.trimEnd());
    expect(JSON.parse((events[1] ?? '').replace('event: message\ndata: ', ''))).toMatchObject({
      id: 1,
      error: { code: MESSAGE_TOO_LARGE_CODE, data: { klymMessageTooLarge: { bytes: Buffer.byteLength(big), complete: true } } },
    });
    expect(events[2]).toBe(small.trimEnd());
    expect(JSON.parse((events[3] ?? '').replace('event: message\ndata: ', ''))).toMatchObject({
      id: 3,
      error: { data: { klymMessageTooLarge: { bytes: Buffer.byteLength(barely), complete: true } } },
    });
    expect(dropped).toEqual([expect.objectContaining({ bytes: Buffer.byteLength(note), complete: true })]);
  });

  it('errors a GET’s SSE stream on an answer over the limit whose request cannot be told', async () => {
    const upstream = await serve((_, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(`event: message\ndata: {"result":{"text":"${'w'.repeat(3_000)}"},"id":1,"extra":[1]}\n\n`);
    });
    const { fetch } = limited();
    const response = await fetch(`${upstream.url}/sse`, { method: 'GET' });
    await expect(response.text()).rejects.toThrow(/could not be told/);
  });
});
