import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { createSessionPool, type SessionPool } from '@klym/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createKlymApp, startKlymServer, type KlymApp, type KlymServerOptions } from '../apps/server/src/server/index.ts';
import { floodingRunner, quickRunner } from './support/server-runners.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const TOKENS = { grynya: 'token-of-grynya-0123456789', mallory: 'token-of-mallory-9876543210' };

async function app(options: Partial<KlymServerOptions> = {}): Promise<KlymApp> {
  const pool: SessionPool = await createSessionPool({ upstreams: {} });
  cleanups.push(() => pool.close());
  const klym = await createKlymApp({ pool, log: () => {}, ...options, tasks: { run: quickRunner, shutdownGraceMs: 0, ...options.tasks } });
  cleanups.push(() => klym.close());
  return klym;
}

/** The official client, talking to the app through `app.request()` (no socket). */
async function client(klym: KlymApp, token?: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL('http://localhost/mcp'), {
    fetch: async (url, init) => klym.app.request(String(url), init as RequestInit),
    ...(token === undefined ? {} : { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  });
  const mcp = new Client({ name: 'grynya', version: '1.0.0' });
  await mcp.connect(transport);
  cleanups.push(() => mcp.close());
  return mcp;
}

const id = (result: unknown): string => (result as { structuredContent: { task_id: string } }).structuredContent.task_id;

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const post = (body: string, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  body,
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
});

const task = (prompt: string): string => JSON.stringify({ prompt });
/** A stream body has no Content-Length: undici sends it chunked, and a body limit must count its bytes as they arrive. */
const chunked = (body: string): ReadableStream<Uint8Array> =>
  new ReadableStream({
    start(controller) {
      for (let at = 0; at < body.length; at += 300) controller.enqueue(new TextEncoder().encode(body.slice(at, at + 300)));
      controller.close();
    },
  });

describe('the HTTP guards', () => {
  it('refuses a Host or an Origin outside the allow-lists with 403, by host name', async () => {
    const klym = await app();
    expect((await klym.app.request('http://evil.example/healthz')).status).toBe(403);
    expect((await klym.app.request('http://localhost:1234/healthz')).status).toBe(200);
    expect((await klym.app.request('/mcp', post(JSON.stringify(initialize), { origin: 'http://evil.example' }))).status).toBe(403);
    expect((await klym.app.request('/mcp', post(JSON.stringify(initialize), { origin: 'null' }))).status).toBe(403);
    expect((await klym.app.request('/mcp', post(JSON.stringify(initialize), { origin: 'http://localhost:6274' }))).status).toBe(200);
  });

  it('answers 413 to a body over the limit', async () => {
    const klym = await app({ maxBodyBytes: 1_000 });
    const big = JSON.stringify({ ...initialize, params: { ...initialize.params, padding: 'x'.repeat(2_000) } });
    expect((await klym.app.request('/mcp', post(big))).status).toBe(413);
    expect((await klym.app.request('/api/tasks', post(JSON.stringify({ prompt: 'x'.repeat(2_000) })))).status).toBe(413);
  });

  it('answers 413 over a socket to a body over the limit, whether it declares its length or comes in chunks', async () => {
    const pool = await createSessionPool({ upstreams: {} });
    cleanups.push(() => pool.close());
    const server = await startKlymServer({ port: 0, pool, tasks: { run: quickRunner, shutdownGraceMs: 0 }, log: () => {}, maxBodyBytes: 1_000 });
    cleanups.push(() => server.close());
    const send = (body: string | ReadableStream<Uint8Array>) =>
      fetch(`${server.url}/api/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, duplex: 'half' } as RequestInit);

    const declared = await send(task('x'.repeat(2_000)));
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is larger than 1000 bytes' } });
    expect((await send(chunked(task('x'.repeat(2_000))))).status).toBe(413);
    // Under the limit, both kinds are read whole and start a task.
    for (const body of [task('declared'), chunked(task(`chunked ${'y'.repeat(600)}`))]) {
      const accepted = await send(body);
      expect(accepted.status).toBe(202);
      expect(await accepted.json()).toMatchObject({ task_id: expect.any(String) });
    }
  });

  it('requires a valid bearer token in the Authorization header when auth is configured', async () => {
    const klym = await app({ auth: { tokens: TOKENS } });
    const none = await klym.app.request('/api/tasks');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await klym.app.request('/api/tasks', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await klym.app.request(`/api/tasks?access_token=${TOKENS.grynya}`)).status).toBe(401);
    expect((await klym.app.request('/api/tasks', { headers: { authorization: `Bearer ${TOKENS.grynya}` } })).status).toBe(200);
    const health = await (await klym.app.request('/healthz')).text();
    expect(health).not.toContain(TOKENS.grynya);
  });

  it('keeps configured secrets out of describe_capabilities when an upstream fails with one in its error', async () => {
    const klym = await createKlymApp({
      upstreams: { grynya: { url: 'http://klym:upstream-secret-4242@127.0.0.1:1/mcp' } },
      tasks: { secrets: ['upstream-secret-4242'], shutdownGraceMs: 0 },
      log: () => {},
    });
    cleanups.push(() => klym.close());
    await klym.service.pool.warmedUp();
    const described = await (await client(klym)).callTool({ name: 'describe_capabilities', arguments: {} });
    expect(described.structuredContent).toMatchObject({ upstreams: { grynya: { state: 'down', error: expect.stringMatching(/unavailable/) } } });
    expect(JSON.stringify(described)).not.toContain('upstream-secret-4242');
  });

  it('refuses options out of range, naming them', async () => {
    await expect(app({ maxBodyBytes: 0 })).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: 'Expected `maxBodyBytes` to be a positive number, got 0' });
    await expect(app({ port: 70_000 })).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringMatching(/`port`/) });
  });

  it('refuses to bind a non-loopback address without tokens', async () => {
    await expect(startKlymServer({ host: '0.0.0.0', port: 0, upstreams: {}, log: () => {} })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringMatching(/0\.0\.0\.0.*tokens/),
    });
  });
});

describe('MCP sessions over Streamable HTTP', () => {
  it('answers 400 to a request without a session id, 404 to an unknown one, 400 to malformed JSON', async () => {
    const klym = await app();
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const missing = await klym.app.request('/mcp', post(list));
    expect(missing.status).toBe(400);
    const unknown = await klym.app.request('/mcp', post(list, { 'mcp-session-id': 'no-such-session' }));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: -32001 } });
    expect((await klym.app.request('/mcp', { method: 'GET', headers: { accept: 'text/event-stream' } })).status).toBe(400);
    const malformed = await klym.app.request('/mcp', post('{"jsonrpc": "2.0", "id": 1, "method":'));
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { code: -32700 } });
  });

  it('rejects a JSON body that is not JSON-RPC on an open session', async () => {
    const klym = await app();
    const opened = await klym.app.request('/mcp', post(JSON.stringify(initialize)));
    const sessionId = opened.headers.get('mcp-session-id') as string;
    expect(sessionId).toBeTruthy();
    const bad = await klym.app.request('/mcp', post(JSON.stringify({ hello: 'world' }), { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' }));
    expect(bad.status).toBe(400);
  });

  it("refuses a session to a principal other than the one who opened it (404), and answers the SSE message endpoint's misuse", async () => {
    const klym = await app({ auth: { tokens: TOKENS } });
    const opened = await klym.app.request('/mcp', post(JSON.stringify(initialize), { authorization: `Bearer ${TOKENS.grynya}` }));
    const sessionId = opened.headers.get('mcp-session-id') as string;
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' };
    expect((await klym.app.request('/mcp', post(list, { ...headers, authorization: `Bearer ${TOKENS.mallory}` }))).status).toBe(404);
    expect((await klym.app.request('/mcp', post(list, { ...headers, authorization: `Bearer ${TOKENS.grynya}` }))).status).toBe(200);

    const auth = { authorization: `Bearer ${TOKENS.grynya}` };
    expect((await klym.app.request('/messages', post(list, auth))).status).toBe(400);
    expect((await klym.app.request('/messages?sessionId=nope', post(list, auth))).status).toBe(404);
    expect((await klym.app.request('/sse', { headers: auth })).status).toBe(501);
  });

  it('leaves nothing behind when an initialize request fails (406, a batch with two initializes)', async () => {
    const klym = await app();
    let subscribed = 0;
    const subscribe = klym.service.onEvent;
    klym.service.onEvent = (listener) => {
      subscribed++;
      const unsubscribe = subscribe(listener);
      return () => {
        subscribed--;
        return unsubscribe();
      };
    };
    for (let index = 0; index < 20; index++) {
      expect((await klym.app.request('/mcp', post(JSON.stringify(initialize), { accept: 'application/json' }))).status).toBe(406);
      expect((await klym.app.request('/mcp', post(JSON.stringify([initialize, { ...initialize, id: 2 }])))).status).toBe(400);
    }
    expect(klym.sessions.size).toBe(0);
    expect(subscribed).toBe(0);
  });

  it('closes idle sessions, after which their id is unknown (404)', async () => {
    const klym = await app({ sessionIdleMs: 60 });
    const mcp = await client(klym);
    await mcp.listTools();
    expect(klym.sessions.size).toBe(1);
    await expect.poll(() => klym.sessions.size, { timeout: 2_000 }).toBe(0);
    await expect(mcp.listTools()).rejects.toThrow(/404|Session not found/);
  });

  it('honours logging/setLevel: task ends are logged to the session at or above its level', async () => {
    const klym = await app();
    const mcp = await client(klym);
    const messages: { level: string; data?: unknown }[] = [];
    mcp.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void messages.push(notification.params));
    const status = async (taskId: string) => (await klym.service.tasks.get(taskId, { principal: 'anonymous' })).status;

    const first = id(await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } }));
    await expect.poll(() => messages.map((message) => message.data)).toContainEqual(`task ${first} ended: completed`);
    expect(messages.at(-1)?.level).toBe('info');

    await mcp.setLoggingLevel('error');
    const ok = id(await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } }));
    const failing = id(await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'fail' } }));
    await expect.poll(() => status(ok)).toBe('completed');
    await expect.poll(() => messages.map((message) => message.data)).toContainEqual(`task ${failing} ended: error (MODEL_ERROR)`);
    expect(messages.map((message) => message.data)).not.toContainEqual(`task ${ok} ended: completed`);
  });
});

describe('bad input to the tools', () => {
  it('answers an unknown tool and invalid arguments with isError results that name the field', async () => {
    const klym = await app();
    const mcp = await client(klym);
    const unknown = await mcp.callTool({ name: 'no_such_tool', arguments: {} });
    expect(unknown).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/no_such_tool/) }] });
    const missing = await mcp.callTool({ name: 'start_async_agent_task', arguments: {} });
    expect(missing).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/prompt/) }] });
    const wrongType = await mcp.callTool({ name: 'check_task_status', arguments: { task_id: 'x', max_log_entries: 'many' } });
    expect(wrongType).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/max_log_entries/) }] });
    const unknownTask = await mcp.callTool({ name: 'check_task_status', arguments: { task_id: 'does-not-exist' } });
    expect(unknownTask).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'TASK_NOT_FOUND', message: expect.stringMatching(/No task "does-not-exist"/) } },
    });
  });

  it('refuses a model the server does not offer, and caps a budget at the server maximum', async () => {
    const klym = await app({ tasks: { models: ['scripted'], maxBudget: { maxSteps: 10, timeoutMs: 60_000 } } });
    const mcp = await client(klym);
    for (const model of ['gpt-4o', 'http://attacker.example/v1']) {
      const refused = await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', model } });
      expect(refused).toMatchObject({
        isError: true,
        structuredContent: { error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`model`:.*scripted/) } },
      });
    }
    const capped = await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', budget: { max_steps: 1_000, timeout_ms: 10_000_000 } } });
    expect(capped.structuredContent).toMatchObject({ model: 'scripted', budget: { max_steps: 10, timeout_ms: 60_000 } });
    const negative = await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', budget: { max_steps: -1 } } });
    expect(negative).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/budget\.max_steps/) }] });
    const policy = await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', tools: { policy: 'everything' } } });
    expect(policy).toMatchObject({ isError: true, structuredContent: { error: { message: expect.stringMatching(/^`tools.policy`/) } } });
  });

  it("hides another principal's task: it cannot see, read or cancel it", async () => {
    const klym = await app({ auth: { tokens: TOKENS }, tasks: { run: floodingRunner(0) } });
    const owner = await client(klym, TOKENS.grynya);
    const other = await client(klym, TOKENS.mallory);
    const { task_id: taskId } = (await owner.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'mine' } })).structuredContent as {
      task_id: string;
    };
    for (const name of ['check_task_status', 'cancel_agent_task']) {
      const refused = await other.callTool({ name, arguments: { task_id: taskId } });
      expect(refused).toMatchObject({ isError: true, structuredContent: { error: { code: 'TASK_NOT_FOUND' } } });
    }
    expect((await other.callTool({ name: 'list_agent_tasks', arguments: {} })).structuredContent).toMatchObject({ tasks: [], total: 0 });
    const rest = await klym.app.request(`/api/tasks/${taskId}`, { headers: { authorization: `Bearer ${TOKENS.mallory}` } });
    expect(rest.status).toBe(404);
    expect((await owner.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).structuredContent).toMatchObject({ status: 'running' });
  });

  it('lets exactly one of 100 concurrent cancels of one task win', async () => {
    const klym = await app({ tasks: { run: floodingRunner(0) } });
    const mcp = await client(klym);
    const { task_id: taskId } = (await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x' } })).structuredContent as { task_id: string };
    const replies = await Promise.all(Array.from({ length: 100 }, () => mcp.callTool({ name: 'cancel_agent_task', arguments: { task_id: taskId } })));
    const outcomes = replies.map((reply) => reply.structuredContent as { cancelled: boolean; status: string });
    expect(outcomes.filter((outcome) => outcome.cancelled)).toHaveLength(1);
    expect(outcomes.every((outcome) => outcome.status === 'cancelled')).toBe(true);
  });

  it('keeps the default status of a running task with 10,000 log entries under 1,200 characters, and pages the rest', async () => {
    const klym = await app({ tasks: { run: floodingRunner(10_000), log: { maxBytes: 200_000 } } });
    const mcp = await client(klym);
    const { task_id: taskId } = (await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x'.repeat(5_000) } })).structuredContent as {
      task_id: string;
    };
    const glance = await mcp.callTool({ name: 'check_task_status', arguments: { task_id: taskId } });
    const text = (glance.content as { text: string }[])[0]?.text ?? '';
    expect(text.length).toBeLessThan(1_200);
    expect(text.length).toBeGreaterThan(200);
    const view = glance.structuredContent as { status: string; log: { entries: { seq: number }[]; next_cursor: number; last_seq: number; dropped: number } };
    expect(view.status).toBe('running');
    expect(view.log.entries.length).toBeGreaterThan(0);
    expect(view.log.last_seq).toBeGreaterThan(10_000);
    expect(view.log.dropped).toBeGreaterThan(0);

    const page = (await mcp.callTool({ name: 'check_task_status', arguments: { task_id: taskId, log_after: 0, max_log_entries: 5 } })).structuredContent as {
      log: { entries: { seq: number; message: string }[]; dropped_before: { from_seq: number; to_seq: number }; next_cursor: number; more: boolean };
    };
    expect(page.log.dropped_before.from_seq).toBe(1);
    expect(page.log.entries).toHaveLength(5);
    expect(page.log.entries[0]?.seq).toBe(page.log.dropped_before.to_seq + 1);
    expect(page.log.entries[0]?.message).toMatch(/^line \d+: x+$/);
    expect(page.log.more).toBe(true);
    const next = (await mcp.callTool({ name: 'check_task_status', arguments: { task_id: taskId, log_after: page.log.next_cursor, max_log_entries: 1 } }))
      .structuredContent as {
      log: { entries: { seq: number }[] };
    };
    expect(next.log.entries[0]?.seq).toBe(page.log.next_cursor + 1);
  });
});
