// Issue #28: protocol revision 2026-07-28 on /mcp beside 2025-11-25, with the Tasks extension, against a real
// Klym server: the v2 SDK's own client in both eras, and raw HTTP where the wire itself is the point.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptedRunner } from './support/mcp-tasks.ts';
import { mcp20260728Call, mcp20260728Post, readEvents, taskIdOf, type Mcp20260728Answer } from './support/mcp-2026-07-28.ts';
import { KLYM_TOOLS, payload, startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };

let harness: ServerHarness | undefined;
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await harness?.cleanup();
  harness = undefined;
});

/** The v2 SDK's client on Klym's /mcp, negotiating the era as `mode` says (the SDK's `legacy` is 2025-11-25 only). */
async function v2Client(mode: 'auto' | 'legacy', token = TOKENS.alice): Promise<Client> {
  const client = new Client({ name: 'grynya-v2', version: '2.0.0' }, { versionNegotiation: { mode } });
  await client.connect(new StreamableHTTPClientTransport(new URL(harness!.server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  clients.push(client);
  return client;
}

/** The JSON-RPC error of a JSON answer. */
const errorOf = async (response: Response): Promise<unknown> => ((await response.json()) as { error?: unknown }).error;

const names = async (client: Client): Promise<string[]> => (await client.listTools()).tools.map((tool) => tool.name).toSorted();

describe('MCP 2026-07-28 and 2025-11-25 on one /mcp', () => {
  it("serves the v2 SDK's client in the era it negotiates, with the same tools, and a task read the same both ways", async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const mcp20260728 = await v2Client('auto');
    const mcp20251125 = await v2Client('legacy');
    expect(mcp20260728.getProtocolEra()).toBe('modern');
    expect(mcp20260728.getNegotiatedProtocolVersion?.()).toBe('2026-07-28');
    expect(mcp20251125.getProtocolEra()).toBe('legacy');
    expect(mcp20260728.getServerCapabilities()?.extensions).toEqual({ 'io.modelcontextprotocol/tasks': {} });

    expect(await names(mcp20260728)).toEqual([...KLYM_TOOLS]);
    expect(await names(mcp20251125)).toEqual(await names(mcp20260728));

    const start = payload(await mcp20260728.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'steps:1' } }));
    const taskId = String(start.task_id);
    await expect
      .poll(async () => payload(await mcp20251125.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).status, { timeout: 10_000 })
      .toBe('completed');
    expect(payload(await mcp20260728.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({
      task_id: taskId,
      status: 'completed',
      result: 'done after 1 steps',
    });
    // One id space: the REST API reads it too, to its owner only.
    const rest = await fetch(`${harness.server.url}/api/tasks/${taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
    expect(await rest.json()).toMatchObject({ task_id: taskId, status: 'completed' });
    const bob = await v2Client('auto', TOKENS.bob);
    expect(payload(await bob.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({ error: { code: 'TASK_NOT_FOUND' } });
  });

  it('refuses an unknown argument over 2026-07-28 as it does over 2025-11-25: an isError result naming it, nothing started', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const mcp20260728 = await v2Client('auto');
    const refused = await mcp20260728.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', idempotencyKey: 'k-1' } });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain('idempotencyKey');
    expect(payload(await mcp20260728.callTool({ name: 'list_agent_tasks', arguments: {} }))).toMatchObject({ tasks: [] });
  });
});

describe('the Tasks extension (io.modelcontextprotocol/tasks) over 2026-07-28', () => {
  it('answers run_agent_task with the flat task handle, and tasks/get with the result inline once done', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const call = await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:2' } });
    expect(call.status).toBe(200);
    const taskId = taskIdOf(call);
    expect(call.result).toMatchObject({
      resultType: 'task',
      taskId,
      status: 'working',
      pollIntervalMs: 1_000,
      ttlMs: null,
      createdAt: expect.any(String),
      lastUpdatedAt: expect.any(String),
    });
    expect(call.result).not.toHaveProperty('task');

    let done: Mcp20260728Answer | undefined;
    await expect
      .poll(
        async () => {
          done = await mcp20260728Call(url, TOKENS.alice, 'tasks/get', { taskId });
          return (done.result as { status?: string }).status;
        },
        { timeout: 10_000 },
      )
      .toBe('completed');
    expect(done?.result).toMatchObject({
      resultType: 'complete',
      taskId,
      status: 'completed',
      statusMessage: 'completed: stop',
      result: { content: [{ type: 'text', text: 'done after 2 steps' }] },
    });
    // Kept an hour after its end: the TTL counts from creation, as the extension defines it.
    const { createdAt, ttlMs } = done!.result as { createdAt: string; ttlMs: number };
    expect(ttlMs).toBeGreaterThanOrEqual(3_600_000);
    expect(Date.parse(createdAt) + ttlMs).toBeGreaterThan(Date.now() + 3_590_000);

    // The same task through Klym's own tool, over 2026-07-28 too.
    const status = await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'check_task_status', arguments: { task_id: taskId } });
    expect((status.result as { structuredContent?: unknown }).structuredContent).toMatchObject({ task_id: taskId, status: 'completed' });
  });

  it('shares one id space with the 2025-11-25 tasks: each era reads the tasks the other started', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const grynya = await harness.connect('streamable-http', TOKENS.alice);
    const { task } = await grynya.request(
      { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'steps:1' }, task: {} } },
      CreateTaskResultSchema,
    );
    const mcp20260728TaskId = taskIdOf(await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:2' } }));
    for (const taskId of [task.taskId, mcp20260728TaskId]) {
      await expect
        .poll(async () => (await mcp20260728Call(url, TOKENS.alice, 'tasks/get', { taskId })).result?.['status'], { timeout: 10_000 })
        .toBe('completed');
      await expect.poll(async () => (await grynya.experimental.tasks.getTask(taskId)).status, { timeout: 10_000 }).toBe('completed');
    }
    expect((await mcp20260728Call(url, TOKENS.alice, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({
      result: { content: [{ type: 'text', text: 'done after 1 steps' }] },
    });
    expect(await grynya.experimental.tasks.getTaskResult(mcp20260728TaskId, CallToolResultSchema)).toMatchObject({
      content: [{ type: 'text', text: 'done after 2 steps' }],
    });
    expect((await grynya.experimental.tasks.listTasks()).tasks.map((listed) => listed.taskId).toSorted()).toEqual([task.taskId, mcp20260728TaskId].toSorted());
  });

  it('keeps a task to its owner: another principal gets -32602 from tasks/get, tasks/update and tasks/cancel, as for an id that never existed', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const taskId = taskIdOf(await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:1' } }));
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      for (const id of [taskId, 'no-such-task']) {
        const answer = await mcp20260728Call(url, TOKENS.bob, method, { taskId: id, ...(method === 'tasks/update' ? { inputResponses: {} } : {}) });
        expect({ method, id, error: answer.error }).toMatchObject({ method, id, error: { code: -32602, message: 'Failed to retrieve task: Task not found' } });
      }
    }
    expect((await mcp20260728Call(url, TOKENS.alice, 'tasks/update', { taskId, inputResponses: { anything: { action: 'accept' } } })).result).toEqual(
      expect.objectContaining({ resultType: 'complete' }),
    );
  });

  it('never answers a task to a client that does not declare the extension: -32021 naming it', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const taskId = taskIdOf(await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:1' } }));
    const required = { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } };
    const call = await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:1' } }, { extension: false });
    expect(call.status).toBe(400);
    expect(call.error).toMatchObject({ code: -32021, data: required });
    for (const method of ['tasks/get', 'tasks/cancel']) {
      expect((await mcp20260728Call(url, TOKENS.alice, method, { taskId }, { extension: false })).error).toMatchObject({ code: -32021, data: required });
    }
    const listen = await mcp20260728Call(url, TOKENS.alice, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, { extension: false });
    expect(listen.error).toMatchObject({ code: -32021, data: required });
    // The plain tools stay open to it.
    const list = await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'list_agent_tasks', arguments: {} }, { extension: false });
    expect((list.result as { structuredContent: { tasks: unknown[] } }).structuredContent.tasks).toHaveLength(1);
  });

  it('cancels a running task with tasks/cancel: the upstream call is cancelled and tasks/get says cancelled', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    harness.grynya.faults.hang = true;
    const url = harness.server.mcpUrl;
    const taskId = taskIdOf(await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'hang' } }));
    await expect.poll(() => harness!.grynya.stats.calls.query_graph ?? 0).toBe(1);
    const cancel = await mcp20260728Call(url, TOKENS.alice, 'tasks/cancel', { taskId });
    expect(cancel.result).toMatchObject({ resultType: 'complete' });
    await expect.poll(() => harness!.grynya.stats.cancelled).toBeGreaterThanOrEqual(1);
    await expect
      .poll(async () => (await mcp20260728Call(url, TOKENS.alice, 'tasks/get', { taskId })).result)
      .toMatchObject({ status: 'cancelled', statusMessage: 'cancelled: cancelled by caller' });
    // A second cancel of an ended task is acknowledged all the same (cancellation is cooperative).
    expect((await mcp20260728Call(url, TOKENS.alice, 'tasks/cancel', { taskId })).result).toMatchObject({ resultType: 'complete' });
  });

  it('streams notifications/tasks on subscriptions/listen for the caller’s own tasks, then ends it gracefully', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    harness.grynya.faults.delayMs = 150;
    const url = harness.server.mcpUrl;
    const mine = taskIdOf(await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:2' } }));
    const bobs = taskIdOf(await mcp20260728Call(url, TOKENS.bob, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:1' } }));
    const listen = await mcp20260728Post(url, TOKENS.alice, {
      jsonrpc: '2.0',
      id: 'sub-1',
      method: 'subscriptions/listen',
      params: { notifications: { taskIds: [mine, bobs, 'no-such-task'] } },
    });
    expect(listen.headers.get('content-type')).toBe('text/event-stream');
    const events = await readEvents(listen, 10_000);

    expect(events[0]).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { taskIds: [mine] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-1' } },
    });
    const told = events.filter((event) => event.method === 'notifications/tasks').map((event) => event.params as Record<string, unknown>);
    expect(told.every((task) => task.taskId === mine)).toBe(true);
    expect(told[0]).toMatchObject({ status: 'working' });
    expect(told.at(-1)).toMatchObject({ taskId: mine, status: 'completed', result: { content: [{ type: 'text', text: 'done after 2 steps' }] } });
    expect(told.filter((task) => task.status === 'completed')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ id: 'sub-1', result: { resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-1' } } });
    // Nothing but task states on it: no progress, no log messages.
    expect(new Set(events.map((event) => event.method ?? 'result'))).toEqual(
      new Set(['notifications/subscriptions/acknowledged', 'notifications/tasks', 'result']),
    );
  });
});

describe('a misbehaving 2026-07-28 client', () => {
  it("gets the spec's errors, and the server stays up", async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const list = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} };
    // The header names 2026-07-28 but the body carries no envelope.
    const bare = await mcp20260728Post(url, TOKENS.alice, list, { envelope: false });
    expect(bare.status).toBe(400);
    expect(await errorOf(bare)).toMatchObject({ code: -32602, message: expect.stringContaining('envelope') });
    // A revision Klym does not speak.
    const future = await mcp20260728Post(url, TOKENS.alice, list, { protocolVersion: '2027-01-01' });
    expect(future.status).toBe(400);
    expect(await errorOf(future)).toMatchObject({ code: -32022, data: { supported: ['2026-07-28'], requested: '2027-01-01' } });
    // The envelope under a 2025-11-25 header: the SDK's classifier decides (a mismatch), not a 2025 session's "Mcp-Session-Id required".
    const mixed = await mcp20260728Post(url, TOKENS.alice, list, { headers: { 'mcp-protocol-version': '2025-11-25' } });
    expect(mixed.status).toBe(400);
    expect(await errorOf(mixed)).toMatchObject({ code: -32020, message: expect.stringContaining('2025-11-25') });
    // Headers that disagree with the body.
    const lying = await mcp20260728Post(url, TOKENS.alice, list, { headers: { 'mcp-method': 'tools/call' } });
    expect(lying.status).toBe(400);
    expect(await errorOf(lying)).toMatchObject({ code: -32020, message: expect.stringContaining('Mcp-Method') });
    // GET and DELETE: the era has none.
    for (const method of ['GET', 'DELETE']) {
      const answer = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${TOKENS.alice}`, 'mcp-protocol-version': '2026-07-28', accept: 'text/event-stream' },
      });
      expect({ method, status: answer.status }).toEqual({ method, status: 405 });
    }
    // An unknown tool is the spec's protocol error in this era (2025-11-25 sessions keep the isError result they had).
    expect((await mcp20260728Call(url, TOKENS.alice, 'tools/call', { name: 'no_such_tool', arguments: {} })).error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('no_such_tool'),
    });
    // No bearer token: the 401 comes before any era is considered.
    expect((await mcp20260728Post(url, undefined, list)).status).toBe(401);
    expect((await fetch(`${harness.server.url}/healthz`)).status).toBe(200);
    expect((await mcp20260728Call(url, TOKENS.alice, 'tools/list', {})).result).toMatchObject({ tools: expect.any(Array) });
  });
});
