import { CallToolResultSchema, CreateTaskResultSchema, McpError, TaskStatusNotificationSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { scriptedRunner, streamTool, textOf } from './support/mcp-tasks.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';
import { MCP_TASK_DEFAULTS } from '@klym/core/internal';

let harness: ServerHarness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

/** The JSON-RPC error a promise rejected with. */
async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof McpError)) throw new Error(`Expected a JSON-RPC error, got ${String(error)}`);
  return error;
}

for (const kind of ['streamable-http', 'sse'] as const) {
  describe(`MCP tasks over ${kind}, with the SDK's client`, () => {
    it('runs run_agent_task through taskCreated, taskStatus and result, telling the session of each transition', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      const client = await harness.connect(kind);
      expect(client.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
      const tool = (await client.listTools()).tools.find((listed) => listed.name === 'run_agent_task');
      expect(tool?.execution).toEqual({ taskSupport: 'required' });
      const told: Task[] = [];
      client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => void told.push(notification.params));

      const streamed = await streamTool(client, 'run_agent_task', { prompt: 'steps:2', budget: { max_steps: 5 } });
      expect(streamed.error).toBeUndefined();
      const taskId = streamed.created?.taskId ?? '';
      expect(streamed.created).toMatchObject({ status: 'working', ttl: 3_600_000, pollInterval: 1_000 });
      expect(streamed.statuses.at(-1)).toMatchObject({ taskId, status: 'completed', statusMessage: 'completed: stop' });
      expect(textOf(streamed.result)).toBe('done after 2 steps');
      expect(streamed.result?.isError).toBeFalsy();
      expect(streamed.result?.structuredContent).toMatchObject({
        task_id: taskId,
        status: 'completed',
        result: 'done after 2 steps',
        budget: { steps: 3, max_steps: 5 },
      });

      // The same task, seen by Klym's own tools: one id, one store.
      expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({
        task_id: taskId,
        status: 'completed',
      });
      expect(payload(await client.callTool({ name: 'list_agent_tasks', arguments: {} }))).toMatchObject({ tasks: [{ task_id: taskId }] });
      await expect
        .poll(() =>
          told
            .filter((task) => task.taskId === taskId)
            .map((task) => task.status)
            .at(-1),
        )
        .toBe('completed');
      expect(told.filter((task) => task.status === 'completed')).toHaveLength(1);
    });

    it('tells the session when a task it queued starts, then when it ends', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner, maxConcurrent: 1 } });
      harness.grynya.faults.delayMs = 200;
      const client = await harness.connect(kind);
      const told: Task[] = [];
      client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => void told.push(notification.params));
      const ahead = await client.request(
        { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'steps:2' }, task: {} } },
        CreateTaskResultSchema,
      );
      const queued = await client.request(
        { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'steps:1' }, task: {} } },
        CreateTaskResultSchema,
      );
      expect(queued.task).toMatchObject({ status: 'working', statusMessage: expect.stringMatching(/^pending: queued/) });
      await expect
        .poll(() => told.filter((task) => task.taskId === queued.task.taskId).map((task) => task.status), { timeout: 10_000 })
        .toEqual(['working', 'completed']);
      expect(told.find((task) => task.taskId === queued.task.taskId)?.statusMessage).not.toMatch(/^pending/);
      expect(told.filter((task) => task.taskId === ahead.task.taskId).at(-1)).toMatchObject({ status: 'completed' });
    });

    it("serves a task started with start_async_agent_task through tasks/get and tasks/result, and an error task's result as isError", async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      const client = await harness.connect(kind);
      const { task_id: taskId } = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'steps:1' } }));
      await waitForEnd(client, String(taskId));
      expect(await client.experimental.tasks.getTask(String(taskId))).toMatchObject({ taskId, status: 'completed' });
      const result = await client.experimental.tasks.getTaskResult(String(taskId), CallToolResultSchema);
      expect(result).toMatchObject({ content: [{ type: 'text', text: 'done after 1 steps' }], structuredContent: { task_id: taskId, status: 'completed' } });

      const failed = await streamTool(client, 'run_agent_task', { prompt: 'fail' });
      const failedId = failed.created?.taskId ?? '';
      expect(failed.statuses.at(-1)).toMatchObject({
        status: 'failed',
        statusMessage: expect.stringMatching(/^MODEL_ERROR: The scripted model was told to fail/),
      });
      const failure = await client.experimental.tasks.getTaskResult(failedId, CallToolResultSchema);
      expect(failure).toMatchObject({ isError: true, structuredContent: { task_id: failedId, status: 'error', error: { code: 'MODEL_ERROR' } } });
      expect(textOf(failure)).toMatch(/failed: MODEL_ERROR/);
    });

    it('cancels a running task with tasks/cancel: the upstream call is cancelled, and Klyms tools see it cancelled', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      harness.grynya.faults.hang = true;
      const client = await harness.connect(kind);
      const { task } = await client.request(
        { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'hang' }, task: {} } },
        CreateTaskResultSchema,
      );
      await expect.poll(() => harness!.grynya.stats.calls.query_graph ?? 0).toBe(1);
      expect(await client.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'working', statusMessage: 'step 1: calling grynya__query_graph' });

      const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
      expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled', statusMessage: 'cancelled: cancelled by caller' });
      await expect.poll(() => harness!.grynya.stats.cancelled).toBeGreaterThanOrEqual(1);
      expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: task.taskId } }))).toMatchObject({
        status: 'cancelled',
        cancel_reason: 'cancelled by caller',
      });
      expect(await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({
        isError: true,
        structuredContent: { status: 'cancelled' },
      });
      const again = await rpcError(client.experimental.tasks.cancelTask(task.taskId));
      expect(again).toMatchObject({ code: -32602, message: expect.stringMatching(/Cannot cancel task in terminal status: cancelled/) });
    });

    it('pages tasks/list over the same tasks list_agent_tasks lists, newest first', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      const client = await harness.connect(kind);
      const ids = new Set<string>();
      for (let index = 0; index < 53; index++) ids.add((await harness.server.klym.service.start({ prompt: 'steps:0' }, 'anonymous')).task_id);
      const first = await client.experimental.tasks.listTasks();
      expect(first.tasks).toHaveLength(50);
      expect(first.nextCursor).toEqual(expect.any(String));
      const second = await client.experimental.tasks.listTasks(first.nextCursor);
      expect(second.tasks).toHaveLength(3);
      expect(second.nextCursor).toBeUndefined();
      expect(new Set([...first.tasks, ...second.tasks].map((task) => task.taskId))).toEqual(ids);
      const listed = payload(await client.callTool({ name: 'list_agent_tasks', arguments: {} })) as { tasks: { task_id: string }[] };
      expect(first.tasks.map((task) => task.taskId)).toEqual(listed.tasks.map((task) => task.task_id));
    });
  });
}

describe("another principal's MCP task", () => {
  it('answers tasks/get, tasks/result and tasks/cancel exactly as for an id that never existed, and tasks/list leaves it out', async () => {
    harness = await startHarness({
      tasks: { run: scriptedRunner },
      auth: { tokens: { grynya: 'the-token-of-grynya-123456', other: 'the-token-of-other-1234567' } },
    });
    harness.grynya.faults.hang = true;
    const owner = await harness.connect('streamable-http', 'the-token-of-grynya-123456');
    const stranger = await harness.connect('sse', 'the-token-of-other-1234567');
    const { task } = await owner.request(
      { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'hang' }, task: {} } },
      CreateTaskResultSchema,
    );
    const unknown = 'AAAAAAAAAAAAAAAAAAAAAA';
    const answers = async (taskId: string): Promise<string[]> =>
      Promise.all(
        [
          stranger.experimental.tasks.getTask(taskId),
          stranger.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
          stranger.experimental.tasks.cancelTask(taskId),
        ].map(async (call) => {
          const error = await rpcError(call);
          return `${error.code} ${error.message.replaceAll(taskId, '<id>')}`;
        }),
      );
    const foreign = await answers(task.taskId);
    expect(foreign).toEqual(await answers(unknown));
    for (const answer of foreign) expect(answer).toMatch(/^-32602 /);
    expect((await stranger.experimental.tasks.listTasks()).tasks).toEqual([]);
    expect(payload(await stranger.callTool({ name: 'check_task_status', arguments: { task_id: task.taskId } }))).toMatchObject({
      error: { code: 'TASK_NOT_FOUND' },
    });
    // Still running, untouched: the stranger's cancel did nothing.
    expect(await owner.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'working' });
  });
});

describe('a tasks/result whose client cancelled it', () => {
  it('stops at once: the store is not read for it again, while the task runs on', async () => {
    harness = await startHarness({ tasks: { run: scriptedRunner } });
    harness.grynya.faults.hang = true;
    const client = await harness.connect('streamable-http');
    const { task } = await client.request(
      { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'hang' }, task: {} } },
      CreateTaskResultSchema,
    );
    const get = vi.spyOn(harness.server.klym.service.tasks, 'get');
    const reads = (): number => get.mock.calls.filter(([taskId]) => taskId === task.taskId).length;

    const waiting = new AbortController();
    const result = client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema, { signal: waiting.signal });
    // It waits by looking at the task, then again each poll interval.
    await expect.poll(reads, { timeout: 4 * MCP_TASK_DEFAULTS.pollIntervalMs }).toBeGreaterThanOrEqual(3);
    waiting.abort('the caller gave up');
    await expect(result).rejects.toThrow('the caller gave up');
    const atAbort = reads();
    // Two and a half poll intervals: a loop still waiting would have read the task twice more.
    await new Promise((resolve) => setTimeout(resolve, 2.5 * MCP_TASK_DEFAULTS.pollIntervalMs));
    expect(reads() - atAbort).toBe(0);
    expect(await client.experimental.tasks.getTask(task.taskId)).toMatchObject({ status: 'working' });
  });
});
