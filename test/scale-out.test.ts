// Issue #13 with real processes: `klym serve` fronts (tasks.concurrency 0) and `klym worker`s on one
// redis-server, over the fake grynya and the fake OpenAI endpoint; workers killed and stopped with real signals.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { mcp20260728Call, mcp20260728Post, readEvents, taskIdOf } from './support/mcp-2026-07-28.ts';
import { startRedisServer, type RedisServer } from './support/redis-server.ts';
import { INTERRUPTED_ANSWER, OWNER, alive, logOf, startScaleOut, startTask, statusOf, type Front, type ScaleOut } from './support/scale-out.ts';

let redis: RedisServer;
let current: ScaleOut | undefined;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis.close();
});
afterEach(async () => {
  await current?.close();
  current = undefined;
});

// A Redis database per test: no test sees another's tasks or queued jobs.
let database = 0;
const open = async (): Promise<ScaleOut> => (current = await startScaleOut({ redis, db: ++database }));

const ended = (front: Front, id: string, timeout = 15_000): Promise<Record<string, unknown>> =>
  vi.waitFor(
    async () => {
      const status = await statusOf(front, id);
      if (!['completed', 'error', 'cancelled'].includes(String(status.status))) throw new Error(`task ${id} is still ${String(status.status)}`);
      return status;
    },
    { timeout, interval: 100 },
  );

describe('Klym fronts and workers as processes on one Redis', () => {
  it('shows a task started on one front at once on another (status, log pages, list), holds maxQueued across them, and a worker completes it', async () => {
    const fleet = await open();
    const { grynya } = fleet;
    const [a, b] = await Promise.all([fleet.front(['--set', 'tasks.maxQueued=2']), fleet.front(['--set', 'tasks.maxQueued=2'])]);
    expect(a.klym.stdout()).toContain('a front only (tasks.concurrency 0)');

    // No worker yet: what is started waits, and the other front sees it at once.
    const id = await startTask(a, 'Count the nodes: tool-1');
    expect(await statusOf(b, id)).toMatchObject({ status: 'pending' });
    expect((await logOf(b, id)).map((entry) => entry.type)).toEqual(['task-create']);
    expect(((await b.api('/api/tasks')).json.tasks as { task_id: string }[]).map((task) => task.task_id)).toEqual([id]);
    const quick = await startTask(b, 'Say done: quick-1');
    for (const front of [a, b])
      expect(await front.api('/api/tasks', { prompt: 'Say done: quick-2' })).toMatchObject({ status: 429, json: { error: { code: 'TASK_QUEUE_FULL' } } });

    // The fronts run nothing (concurrency 0): the workers run both, and call the upstream.
    await Promise.all([fleet.worker(), fleet.worker()]);
    expect(await ended(b, id)).toMatchObject({ status: 'completed', result: 'The graph answered.' });
    expect(await ended(a, quick)).toMatchObject({ status: 'completed', result: 'Done: quick-1.' });
    expect(grynya.stats.calls.query_graph).toBe(1);
    expect(await statusOf(a, id)).toMatchObject({ status: 'completed', result: 'The graph answered.' });

    // The log read in pages of two from the second front is the log the first front shows whole.
    const whole = await logOf(a, id);
    expect(whole.map((entry) => entry.type)).toEqual(expect.arrayContaining(['task-create', 'task-start', 'tool-call', 'tool-result', 'task-end']));
    const paged: unknown[] = [];
    for (let after = 0, more = true; more;) {
      const { json } = await b.api(`/api/tasks/${id}/logs?after=${after}&limit=2`);
      paged.push(...(json.entries as unknown[]));
      after = Number(json.next_cursor);
      more = json.more === true;
    }
    expect(paged).toEqual(whole);
  });

  it('serves MCP tasks of both eras from any front: a 2026 task handle from one, its state, notifications, 2025 result and cancel from the other', async () => {
    const fleet = await open();
    const [a, b] = await Promise.all([fleet.front(), fleet.front()]);
    await fleet.worker();
    const [mcpA, mcpB] = [`${a.url}/mcp`, `${b.url}/mcp`];
    const run = async (prompt: string): Promise<string> =>
      taskIdOf(await mcp20260728Call(mcpA, OWNER, 'tools/call', { name: 'run_agent_task', arguments: { prompt } }));

    const slow = await run('Take your time: slow-1');
    expect((await mcp20260728Call(mcpB, OWNER, 'tasks/get', { taskId: slow })).result).toMatchObject({ taskId: slow, status: 'working' });
    const listen = await mcp20260728Post(mcpB, OWNER, {
      jsonrpc: '2.0',
      id: 1,
      method: 'subscriptions/listen',
      params: { notifications: { taskIds: [slow] } },
    });
    const events = readEvents(listen, 15_000);
    fleet.releaseSlow();
    const told = (await events).filter((event) => event.method === 'notifications/tasks').map((event) => event.params);
    expect(told.at(-1)).toMatchObject({ taskId: slow, status: 'completed', result: { content: [{ type: 'text', text: 'Done: slow-1.' }] } });
    expect((await mcp20260728Call(mcpA, OWNER, 'tasks/get', { taskId: slow })).result).toMatchObject({ status: 'completed' });
    // The 2025-11-25 era on the other front, over the same store: Grynya's client as it is today.
    const grynya = new Client({ name: 'grynya', version: '1.0.0' });
    await grynya.connect(new StreamableHTTPClientTransport(new URL(mcpB), { requestInit: { headers: { Authorization: `Bearer ${OWNER}` } } }));
    try {
      expect(await grynya.experimental.tasks.getTaskResult(slow, CallToolResultSchema)).toMatchObject({ content: [{ type: 'text', text: 'Done: slow-1.' }] });
      const { task } = await grynya.request(
        { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'Say done: quick-1' }, task: {} } },
        CreateTaskResultSchema,
      );
      await expect
        .poll(async () => (await mcp20260728Call(mcpA, OWNER, 'tasks/get', { taskId: task.taskId })).result?.['status'], { timeout: 10_000 })
        .toBe('completed');
    } finally {
      await grynya.close();
    }

    const think = await run('Think it over: think-1');
    await expect.poll(() => fleet.llm.requests.filter((request) => request.body.includes('think-1')).length, { timeout: 10_000 }).toBe(1);
    expect((await mcp20260728Call(mcpB, OWNER, 'tasks/cancel', { taskId: think })).result).toMatchObject({ resultType: 'complete' });
    await expect.poll(() => fleet.llm.abandoned.filter((request) => request.body.includes('think-1')).length, { timeout: 5_000 }).toBe(1);
    await expect
      .poll(async () => (await mcp20260728Call(mcpA, OWNER, 'tasks/get', { taskId: think })).result?.['status'], { timeout: 5_000 })
      .toBe('cancelled');
    expect(await statusOf(b, think)).toMatchObject({ status: 'cancelled', cancel_reason: 'cancelled by caller' });
  }, 40_000);

  it('carries a cancel from a front to the worker running the task: its upstream call and its model request are cancelled', async () => {
    const fleet = await open();
    const { grynya, llm } = fleet;
    const [a, b] = await Promise.all([fleet.front(), fleet.front()]);
    await Promise.all([fleet.worker(), fleet.worker()]);

    grynya.faults.hang = true;
    const tool = await startTask(a, 'Count the nodes: tool-1');
    await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
    expect((await b.api(`/api/tasks/${tool}/cancel`, {})).json).toMatchObject({ cancelled: true, status: 'cancelled' });
    // On the cancel channel, not by stall detection: grynya hears `notifications/cancelled` from the worker.
    await expect.poll(() => grynya.stats.cancelled, { timeout: 5_000 }).toBe(1);
    grynya.faults.hang = false;

    const think = await startTask(a, 'Think it over: think-1');
    await expect.poll(() => llm.requests.filter((request) => request.body.includes('think-1')).length, { timeout: 10_000 }).toBe(1);
    expect((await b.api(`/api/tasks/${think}/cancel`, {})).json).toMatchObject({ cancelled: true, status: 'cancelled' });
    await expect.poll(() => llm.abandoned.filter((request) => request.body.includes('think-1')).length, { timeout: 5_000 }).toBe(1);

    expect(await statusOf(a, tool)).toMatchObject({ status: 'cancelled', cancel_reason: 'cancelled by caller' });
    const next = await startTask(b, 'Say done: quick-1');
    expect(await ended(a, next)).toMatchObject({ status: 'completed', result: 'Done: quick-1.' });
    expect(grynya.stats.calls.query_graph).toBe(1);
  });

  it('has another worker take over the task of a worker killed with SIGKILL mid-tool-call, without replaying the call', async () => {
    const fleet = await open();
    const { grynya, llm, llmCalls } = fleet;
    const front = await fleet.front();
    const first = await fleet.worker();
    grynya.faults.hang = true;
    const id = await startTask(front, 'Count the nodes: tool-1');
    await expect.poll(() => grynya.stats.calls.query_graph ?? 0, { timeout: 10_000 }).toBe(1);
    const second = await fleet.worker();

    first.child.kill('SIGKILL');
    expect((await first.exited()).signal).toBe('SIGKILL');
    // Its lock (tasks.lockDurationMs 1.5 s) runs out, and the second worker's stalled check hands it the task.
    expect(await ended(front, id)).toMatchObject({ status: 'completed', result: INTERRUPTED_ANSWER, resumed_from: [0] });

    expect(grynya.stats.calls.query_graph).toBe(1);
    const log = await logOf(front, id);
    expect(log.filter((entry) => entry.type === 'task-resume')).toEqual([expect.objectContaining({ fromStep: 0, interruptedCalls: ['grynya__query_graph'] })]);
    expect(log.filter((entry) => entry.type === 'tool-call')).toHaveLength(1);
    // The model was told the call's outcome is unknown, on the second worker's request.
    expect(llmCalls.get('tool-1')).toBe(2);
    expect(llm.requests.at(-1)?.body).toContain('outcome is unknown');
    expect(alive(second)).toBe(true);
  });

  it('on SIGTERM, lets a worker finish a short task within the grace period, hands a long one back at once, and exits 0', async () => {
    const fleet = await open();
    const { llmCalls } = fleet;
    const front = await fleet.front();
    // A lock of 60 s: were the long task not handed back, stall detection would take a minute to move it.
    const first = await fleet.worker(['--set', 'tasks.lockDurationMs=60000', '--set', 'tasks.shutdownGraceMs=3000']);
    const short = await startTask(front, 'Answer when asked: slow-1');
    const long = await startTask(front, 'Think it over: think-1');
    await expect.poll(() => [llmCalls.get('slow-1'), llmCalls.get('think-1')], { timeout: 10_000 }).toEqual([1, 1]);
    const second = await fleet.worker();

    first.child.kill('SIGTERM');
    await first.waitFor(/worker stopping/, 'stderr');
    fleet.releaseSlow();
    expect((await first.exited()).code).toBe(0);

    expect(await statusOf(front, short)).toMatchObject({ status: 'completed', result: 'Done: slow-1.' });
    expect((await logOf(front, short)).map((entry) => entry.type)).not.toContain('task-resume');
    // Handed back, not cancelled: the second worker resumes it from the queue's head.
    expect(await ended(front, long, 20_000)).toMatchObject({ status: 'completed', result: 'Thought it over.', resumed_from: [0] });
    expect((await logOf(front, long)).filter((entry) => entry.type === 'task-resume')).toHaveLength(1);
    expect(alive(second)).toBe(true);
  });
});
