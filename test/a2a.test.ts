import { A2A_VERSION_HEADER, TaskState, type Message, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { a2aClient, textMessage } from './support/a2a-client.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';
import { freePort } from './support/upstream-servers.ts';

/** What the scripted model's self-check reports when every upstream works. */
const ALL_WELL = 'Бачу базу та інструменти, полет нормальний';
const TOKENS = { grynya: 'a2a-token-grynya-0123456789', other: 'a2a-token-other-0123456789' };

let harness: ServerHarness | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const clientOf = a2aClient;
const message = textMessage;

const send = (client: Client, text: string, extra: Partial<Message> = {}) =>
  client.sendMessage({
    tenant: '',
    message: message(text, extra),
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
    metadata: undefined,
  });

const textOf = (task: Task): string => {
  const part = task.artifacts.find((artifact) => artifact.artifactId === 'result')?.parts[0]?.content;
  return part?.$case === 'text' ? part.value : '';
};

async function rpc(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKENS.grynya}`, [A2A_VERSION_HEADER]: '1.0', ...headers },
    body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

describe('A2A 1.0 beside MCP, with the @a2a-js/sdk client', () => {
  it('serves a public card without the inventory, the extended card with it to a caller with a token, and delegates a task whose id reads the same over MCP and REST', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const { url } = harness.server;
    // The extended card answers at once, an upstream still connecting named as such: wait for it, to see its tools there.
    await harness.server.klym.service.pool.warmedUp();
    const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      name: 'Klym',
      supportedInterfaces: [{ url: `${url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'bearer' } } },
      skills: [{ id: 'delegate-heavy-work', name: 'Delegate heavy work', description: expect.stringContaining('GetExtendedAgentCard') }],
    });
    // Served without login, it names no upstream, state, tool, model or policy.
    expect(JSON.stringify(card)).not.toMatch(/grynya|ready|scripted|Models:|Tools:|policies:/i);

    const client = await clientOf(url, TOKENS.grynya);
    // The SDK's client reads the extended card because the public one says there is one.
    const extended = await client.getAgentCard();
    expect(extended.skills[0]?.description).toContain('Models: scripted');
    expect(extended.skills[0]?.description).toMatch(/Upstreams: grynya \(ready, \d+ tools\)\. Tools: grynya__/);
    expect(extended.skills[0]?.tags).toContain('grynya');
    expect(extended.supportedInterfaces[0]?.url).toBe(`${url}/a2a`);
    // Without a token, GetExtendedAgentCard does not reach the endpoint at all.
    const anonymous = await fetch(`${url}/a2a/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [A2A_VERSION_HEADER]: '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetExtendedAgentCard', params: {} }),
    });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).not.toContain('grynya__');

    const started = (await send(client, 'Self-check, please')) as Task;
    expect(started.status?.state).toBeOneOf([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]);
    await expect
      .poll(async () => (await client.getTask({ tenant: '', id: started.id })).status?.state, { timeout: 15_000 })
      .toBe(TaskState.TASK_STATE_COMPLETED);
    const done = await client.getTask({ tenant: '', id: started.id });
    expect(textOf(done)).toMatch(new RegExp(`^${ALL_WELL}`, 'm'));

    const mcp = await harness.connect('streamable-http', TOKENS.grynya);
    const status = await waitForEnd(mcp, started.id);
    expect(status).toMatchObject({ task_id: started.id, status: 'completed' });
    expect(payload(await mcp.callTool({ name: 'check_task_status', arguments: { task_id: started.id, full_result: true } })).result).toBe(textOf(done));
    const rest = (await (await fetch(`${url}/api/tasks/${started.id}`, { headers: { authorization: `Bearer ${TOKENS.grynya}` } })).json()) as Record<
      string,
      unknown
    >;
    expect(rest).toMatchObject({ task_id: started.id, status: 'completed' });

    const listed = await client.listTasks({
      tenant: '',
      contextId: '',
      status: TaskState.TASK_STATE_COMPLETED,
      pageToken: '',
      statusTimestampAfter: undefined,
    });
    expect(listed.tasks.map((task) => task.id)).toEqual([started.id]);
    // The messageId is the idempotency key: the same message again answers the same task.
    const again = (await client.sendMessage({
      tenant: '',
      message: { ...message('Self-check, please'), messageId: 'same-message' },
      configuration: undefined,
      metadata: undefined,
    })) as Task;
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const twice = (await send(client, 'Self-check, please', { messageId: 'same-message' })) as Task;
    expect(twice.id).toBe(again.id);

    // metadata.klym carries what start_async_agent_task takes beside the prompt, parsed by the same schema.
    const budgeted = (await send(client, 'Self-check, please', { metadata: { klym: { model: 'scripted', budget: { max_steps: 5 } } } })) as Task;
    expect((await restCall(url, `/api/tasks/${budgeted.id}`, TOKENS.grynya)).json).toMatchObject({ model: 'scripted', budget: { max_steps: 5 } });
    await expect(send(client, 'Self-check, please', { metadata: { klym: { model: 'gpt-nope' } } })).rejects.toMatchObject({
      name: 'RequestMalformedError',
      message: expect.stringContaining('model'),
    });
    await expect(send(client, 'Self-check, please', { metadata: { klym: { budgt: {} } } })).rejects.toMatchObject({
      name: 'RequestMalformedError',
      message: expect.stringContaining('klym.budgt'),
    });

    await expect(client.cancelTask({ tenant: '', id: started.id, metadata: undefined })).rejects.toMatchObject({ name: 'TaskNotCancelableError' });
    await expect(send(client, 'And now?', { taskId: started.id })).rejects.toMatchObject({ name: 'UnsupportedOperationError' });

    const other = await clientOf(url, TOKENS.other);
    await expect(other.getTask({ tenant: '', id: started.id })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    const raw = await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'GetTask', params: { id: started.id } }), {
      authorization: `Bearer ${TOKENS.other}`,
    });
    expect(raw.json).toMatchObject({ id: 7, error: { code: -32001 } });
  });

  it('lists tasks by context (each task is its own), by status time, and with artifacts only when asked', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const client = await clientOf(harness.server.url, TOKENS.grynya);
    const list = (fields: { contextId?: string; statusTimestampAfter?: string; includeArtifacts?: boolean } = {}) =>
      client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined, ...fields });
    const done = async (task: Task): Promise<Task> => {
      await expect
        .poll(async () => (await client.getTask({ tenant: '', id: task.id })).status?.state, { timeout: 15_000 })
        .toBe(TaskState.TASK_STATE_COMPLETED);
      return client.getTask({ tenant: '', id: task.id });
    };
    const first = await done((await send(client, 'Self-check, please')) as Task);
    // The next task's status changes after this instant: wait until the clock has passed it.
    const cut = new Date(Date.parse(first.status?.timestamp ?? '') + 1).toISOString();
    await expect.poll(() => Date.now()).toBeGreaterThan(Date.parse(cut));
    const second = await done((await send(client, 'Self-check, please')) as Task);

    expect((await list()).tasks.map((task) => task.id)).toEqual([second.id, first.id]);
    expect((await list({ contextId: first.id })).tasks.map((task) => task.id)).toEqual([first.id]);
    expect(first.contextId).toBe(first.id);
    expect((await list({ contextId: 'no-such-context' })).tasks).toEqual([]);
    expect(
      (
        await (
          await clientOf(harness.server.url, TOKENS.other)
        ).listTasks({ tenant: '', contextId: first.id, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined })
      ).tasks,
    ).toEqual([]);
    expect(await list({ statusTimestampAfter: cut })).toMatchObject({ tasks: [{ id: second.id }], totalSize: 1, nextPageToken: '' });
    expect((await list({ statusTimestampAfter: first.status?.timestamp ?? '' })).tasks.map((task) => task.id)).toEqual([second.id, first.id]);

    // Without includeArtifacts a list stays small; with it, each task's answer is there as GetTask has it.
    expect((await list()).tasks.map((task) => task.artifacts)).toEqual([[], []]);
    const full = await list({ includeArtifacts: true, contextId: second.id });
    expect(textOf(full.tasks[0] as Task)).toBe(textOf(second));
    expect(textOf(second)).toMatch(new RegExp(`^${ALL_WELL}`, 'm'));
  });

  it('streams a task: the Task first, status updates, the result and the end', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const client = await clientOf(harness.server.url, TOKENS.grynya);
    const events = [];
    for await (const event of client.sendMessageStream({ tenant: '', message: message('Self-check, please'), configuration: undefined, metadata: undefined }))
      events.push(event.payload);
    expect(events[0]?.$case).toBe('task');
    const last = events.at(-1);
    expect(last?.$case === 'statusUpdate' ? last.value.status?.state : undefined).toBe(TaskState.TASK_STATE_COMPLETED);
    const result = events.find((event) => event?.$case === 'artifactUpdate');
    expect(result?.$case === 'artifactUpdate' ? result.value.artifact?.parts[0]?.content : undefined).toMatchObject({
      $case: 'text',
      value: expect.stringMatching(new RegExp(`^${ALL_WELL}`, 'm')),
    });
  });

  it('refuses to subscribe to a task that has ended with UnsupportedOperationError (-32004), as an unknown one with TaskNotFoundError', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const { url } = harness.server;
    const client = await clientOf(url, TOKENS.grynya);
    const started = (await send(client, 'Self-check, please')) as Task;
    await expect
      .poll(async () => (await client.getTask({ tenant: '', id: started.id })).status?.state, { timeout: 15_000 })
      .toBe(TaskState.TASK_STATE_COMPLETED);

    const refused = await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SubscribeToTask', params: { id: started.id } }));
    expect(refused.json).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32004, message: expect.stringContaining('has already ended') } });
    // The SDK's client sees the same refusal, not a stream that closes.
    await expect(async () => {
      for await (const _ of client.resubscribeTask({ tenant: '', id: started.id })) {
        // nothing is streamed
      }
    }).rejects.toThrow(/has already ended/);
    // An unknown task is still TaskNotFoundError.
    const unknown = await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'SubscribeToTask', params: { id: 'no-such-task' } }));
    expect(unknown.json).toMatchObject({ error: { code: -32001 } });
  });

  it('serves the public card with Cache-Control max-age and an ETag, and answers If-None-Match with 304', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const cardUrl = `${harness.server.url}/.well-known/agent-card.json`;
    const first = await fetch(cardUrl);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^W\/"[0-9a-f]{16}"$/);
    expect(first.headers.get('last-modified')).not.toBeNull();
    const body = await first.text();

    const again = await fetch(cardUrl, { headers: { 'if-none-match': etag ?? '' } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    expect(again.headers.get('etag')).toBe(etag);
    // Another tag gets the card again, the same body under the same tag.
    const other = await fetch(cardUrl, { headers: { 'if-none-match': 'W/"0000000000000000"' } });
    expect(other.status).toBe(200);
    expect(await other.text()).toBe(body);
  });

  it('answers JSON-RPC at /a2a/ as at /a2a (where the conformance kit posts), behind the same token', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const { url } = harness.server;
    const request = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ListTasks', params: {} });
    const headers = { 'content-type': 'application/json', [A2A_VERSION_HEADER]: '1.0' };
    const slashed = await fetch(`${url}/a2a/`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${TOKENS.grynya}` }, body: request });
    expect(slashed.status).toBe(200);
    expect(await slashed.json()).toMatchObject({ jsonrpc: '2.0', id: 3, result: { tasks: [] } });
    expect((await fetch(`${url}/a2a/`, { method: 'POST', headers, body: request })).status).toBe(401);
  });

  it('refuses a request declared as another Content-Type than JSON with ContentTypeNotSupportedError (-32005), as the SDK server does', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const { url } = harness.server;
    const request = JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ListTasks', params: {} });
    const plain = await rpc(url, request, { 'content-type': 'text/plain' });
    expect(plain.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32005, message: expect.stringContaining('text/plain') } });
    // JSON by another name is JSON; a JSON-declared body that does not parse is still a parse error.
    expect((await rpc(url, request, { 'content-type': 'application/a2a+json; charset=utf-8' })).json).toMatchObject({ id: 4, result: { tasks: [] } });
    expect((await rpc(url, '{not json', { 'content-type': 'application/json' })).json).toMatchObject({ error: { code: -32700 } });
  });

  it('cancels a running task through to its run, canceled on every surface', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    harness.grynya.faults.hang = true;
    const client = await clientOf(harness.server.url, TOKENS.grynya);
    const started = (await send(client, 'Self-check, please')) as Task;
    await expect.poll(() => harness?.grynya.stats.toolCalls, { timeout: 10_000 }).toBeGreaterThan(0);
    expect((await client.getTask({ tenant: '', id: started.id })).status?.state).toBe(TaskState.TASK_STATE_WORKING);
    // A subscriber (another connection) sees the task as it stands first, then its end, and the stream closes.
    const subscription = client.resubscribeTask({ tenant: '', id: started.id })[Symbol.asyncIterator]();
    const first = (await subscription.next()).value;
    expect(first?.payload).toMatchObject({ $case: 'task', value: { id: started.id, status: { state: TaskState.TASK_STATE_WORKING } } });
    const cancelled = await client.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const rest = [];
    for (let next = await subscription.next(); next.done !== true; next = await subscription.next()) rest.push(next.value.payload);
    expect(rest.at(-1)).toMatchObject({ $case: 'statusUpdate', value: { taskId: started.id, status: { state: TaskState.TASK_STATE_CANCELED } } });
    const mcp = await harness.connect('streamable-http', TOKENS.grynya);
    expect(payload(await mcp.callTool({ name: 'check_task_status', arguments: { task_id: started.id } }))).toMatchObject({ status: 'cancelled' });
  });

  it("holds a caller to its quotas at this door too: past maxQueued a send is refused with the numbers, another caller's goes on", async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { maxConcurrent: 1, perPrincipal: { maxQueued: 1 } } });
    harness.grynya.faults.hang = true;
    const sendRaw = (id: number, token: string) =>
      rpc(
        harness?.server.url ?? '',
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'SendMessage',
          params: { message: { messageId: `m${id}`, role: 'ROLE_USER', parts: [{ text: 'Self-check, please' }] }, configuration: { returnImmediately: true } },
        }),
        {
          authorization: `Bearer ${token}`,
        },
      );
    // One runs (held by grynya), one waits: the caller's maxQueued of 1.
    expect((await sendRaw(1, TOKENS.grynya)).json).toMatchObject({ id: 1, result: { task: { id: expect.any(String) } } });
    await expect.poll(() => harness?.grynya.stats.toolCalls, { timeout: 10_000 }).toBeGreaterThan(0);
    expect((await sendRaw(2, TOKENS.grynya)).json).toMatchObject({ id: 2, result: { task: { status: { state: 'TASK_STATE_SUBMITTED' } } } });
    expect((await sendRaw(3, TOKENS.grynya)).json).toMatchObject({
      id: 3,
      error: {
        code: -32603,
        message: expect.stringMatching(/^QUOTA_EXCEEDED: Principal grynya has 1 task waiting, its maxQueued is 1 \(tasks\.perPrincipal\.maxQueued\)/),
      },
    });
    expect((await sendRaw(4, TOKENS.other)).json).toMatchObject({ id: 4, result: { task: { status: { state: 'TASK_STATE_SUBMITTED' } } } });
  });

  it('answers bad JSON, bad requests, unknown methods, wrong params and a missing version with the spec’s errors, and stays up', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS } });
    const { url } = harness.server;
    expect(await rpc(url, '{"jsonrpc": "2.0", "method": ')).toMatchObject({ status: 200, json: { id: null, error: { code: -32700 } } });
    expect((await rpc(url, '[1, 2]')).json).toMatchObject({ error: { code: -32600 } });
    expect((await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: {} }))).json).toMatchObject({
      id: 1,
      error: { code: -32601 },
    });
    expect((await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'GetTask', params: [] }))).json).toMatchObject({ id: 2, error: { code: -32602 } });
    expect(
      (await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: { messageId: 'm', role: 'ROLE_USER', parts: [] } } })))
        .json,
    ).toMatchObject({
      id: 3,
      error: { code: -32602, message: expect.stringContaining('prompt') },
    });
    expect(
      (await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'GetTask', params: { id: 'nope' } }), { [A2A_VERSION_HEADER]: '' })).json,
    ).toMatchObject({ id: 4, error: { code: -32009 } });
    expect(
      (await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'GetTask', params: { id: 'nope' } }), { [A2A_VERSION_HEADER]: '0.3' })).json,
    ).toMatchObject({ id: 5, error: { code: -32009 } });
    expect((await rpc(url, JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'GetTask', params: { id: 'nope' } }))).json).toMatchObject({
      id: 6,
      error: { code: -32001 },
    });
    // A part of a media type Klym does not take (the conformance kit's CORE-SEND-003): ContentTypeNotSupportedError.
    const raw = { raw: 'dGNr', mediaType: 'application/x-unsupported-tck-type' };
    expect(
      (
        await rpc(
          url,
          JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SendMessage', params: { message: { messageId: 'm7', role: 'ROLE_USER', parts: [raw] } } }),
        )
      ).json,
    ).toMatchObject({ id: 7, error: { code: -32005 } });
    const unauthenticated = await fetch(`${url}/a2a`, { method: 'POST', body: '{}' });
    expect(unauthenticated.status).toBe(401);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe('A2A on `klym serve`, as a process with the scripted model', () => {
  it('names the configured a2a.url in its card, and the SDK client delegates a task there to completion', async () => {
    const grynya = await createFakeGrynya();
    const cwd = temporaryDirectory();
    cleanups.push(
      async () => cwd[Symbol.dispose](),
      () => grynya.close(),
    );
    const port = await freePort();
    const config = {
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
      server: { port, tokens: { grynya: TOKENS.grynya } },
      a2a: { url: `http://localhost:${port}/a2a` },
    };
    writeFileSync(path.join(cwd.path, 'klym.config.json'), JSON.stringify(config));
    const { klym, url } = await serveKlym(cwd.path, cleanups);
    const client = await clientOf(url, TOKENS.grynya);
    expect((await client.getAgentCard()).supportedInterfaces[0]?.url).toBe(`http://localhost:${port}/a2a`);
    const started = (await send(client, 'Self-check, please')) as Task;
    await expect
      .poll(async () => (await client.getTask({ tenant: '', id: started.id })).status?.state, { timeout: 15_000 })
      .toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(await client.getTask({ tenant: '', id: started.id }))).toMatch(new RegExp(`^${ALL_WELL}`, 'm'));
    expect((await restCall(url, `/api/tasks/${started.id}`, TOKENS.grynya)).json).toMatchObject({ task_id: started.id, status: 'completed' });
    klym.child.kill('SIGTERM');
    expect((await klym.exited()).code).toBe(0);
  });
});
