import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/server';
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectInMemory } from '../../../../test/support/in-memory-client.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import type { AgentRunner } from '../tasks/task-manager-types.ts';
import { createMemoryTaskStore } from '../tasks/store/memory-task-store.ts';
import { createTaskService, type TaskService } from '../tasks/task-service.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { runResult } from '../testing/run-result.ts';
import { TASK_TOOLS_INSTRUCTIONS, registerTaskTools, type RegisterTaskToolsOptions } from './register-task-tools.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** Answers `fine`, or fails with MODEL_ERROR when the prompt is `fail`, as soon as it is released. */
const quick: AgentRunner = async (options) => {
  if (options.prompt === 'fail') throw Object.assign(new Error('The stand-in model was told to fail'), { code: 'MODEL_ERROR' });
  return runResult('fine');
};

/** A run that goes on until it is aborted, as one waiting on a hung upstream does. */
const hanging: AgentRunner = (options) =>
  new Promise((_, reject) => options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true }));

function echo(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  return server;
}

async function taskService(): Promise<TaskService> {
  const pool: SessionPool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echo) } });
  const service = createTaskService({ pool, run: quick, shutdownGraceMs: 0 });
  cleanups.push(
    () => pool.close(),
    () => service.close(),
  );
  await pool.warmedUp();
  return service;
}

/** A plain McpServer of another agent with the task tools, and the SDK client connected to it in memory. */
async function connect(service: TaskService, options?: RegisterTaskToolsOptions): Promise<Client> {
  const server = new McpServer({ name: 'another-agent', version: '1.0.0' }, { capabilities: { logging: {} }, instructions: TASK_TOOLS_INSTRUCTIONS });
  registerTaskTools(server, service, options);
  const client = await connectInMemory(server);
  cleanups.push(() => client.close());
  return client;
}

/** The JSON a tool answered, checked to be the same as text and as structuredContent. */
function payload(result: unknown): Record<string, unknown> {
  const { content, structuredContent } = result as CallToolResult;
  const [item] = content;
  if (item?.type !== 'text') throw new Error(`Expected one text item, got ${JSON.stringify(content)}`);
  expect(JSON.parse(item.text)).toEqual(structuredContent);
  return structuredContent as Record<string, unknown>;
}

describe('registerTaskTools', () => {
  it('serves the eight task tools on any McpServer, with their annotations and input schemas', async () => {
    const client = await connect(await taskService());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual([
      'start_async_agent_task',
      'check_task_status',
      'read_task_artifact',
      'query_task_artifact',
      'reply_to_agent_task',
      'cancel_agent_task',
      'list_agent_tasks',
      'describe_capabilities',
    ]);
    const start = tools.find((tool) => tool.name === 'start_async_agent_task');
    expect(start).toMatchObject({ annotations: { readOnlyHint: false, openWorldHint: true }, inputSchema: { required: ['prompt'] } });
    expect(Object.keys(start?.inputSchema.properties ?? {})).toContain('idempotency_key');
    expect(Object.keys(tools.find((tool) => tool.name === 'list_agent_tasks')?.inputSchema.properties ?? {})).toEqual(['status', 'cursor', 'limit']);
    expect(client.getInstructions()).toBe(TASK_TOOLS_INSTRUCTIONS);
  });

  it('starts, checks, lists and cancels tasks for the anonymous principal, answering JSON as text and structuredContent', async () => {
    const service = await taskService();
    const client = await connect(service);
    const started = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work', idempotency_key: 'k1' } }));
    expect(started).toMatchObject({ task_id: expect.any(String), model: 'scripted', budget: { max_steps: 25 } });
    const taskId = String(started.task_id);
    expect((await service.tasks.get(taskId, { principal: 'anonymous' })).principal).toBe('anonymous');
    expect(payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work', idempotency_key: 'k1' } })).task_id).toBe(taskId);

    await expect.poll(async () => payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).status).toBe('completed');
    expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({
      result: 'fine',
      budget: { steps: 1, max_steps: 25 },
    });
    expect(payload(await client.callTool({ name: 'list_agent_tasks', arguments: { limit: 1 } }))).toMatchObject({
      total: 1,
      tasks: [{ task_id: taskId, status: 'completed', prompt: 'work' }],
    });
    expect(payload(await client.callTool({ name: 'cancel_agent_task', arguments: { task_id: taskId } }))).toMatchObject({
      cancelled: false,
      status: 'completed',
    });
    expect(payload(await client.callTool({ name: 'describe_capabilities', arguments: {} }))).toMatchObject({
      tools: [{ name: 'demo__echo', read_only: true }],
      models: ['scripted'],
    });
  });

  it('answers failures as isError results with a code and a message naming what is wrong', async () => {
    const client = await connect(await taskService());
    const unknown = await client.callTool({ name: 'check_task_status', arguments: { task_id: 'does-not-exist' } });
    expect(unknown).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'TASK_NOT_FOUND', message: expect.stringMatching(/No task "does-not-exist"/) } },
    });
    const model = await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'x', model: 'gpt-4o' } });
    expect(model).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`model`:.*scripted/) } },
    });
    const cursor = await client.callTool({ name: 'list_agent_tasks', arguments: { cursor: 'bogus' } });
    expect(cursor).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`cursor`/) } } });
  });

  it("refuses a start past the caller's own quota as an isError result naming it, and tells the caller its quota and each waiting task's place", async () => {
    const pool: SessionPool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echo) } });
    const service = createTaskService({ pool, run: hanging, maxConcurrent: 1, perPrincipal: { maxQueued: 1 }, shutdownGraceMs: 0 });
    cleanups.push(
      () => pool.close(),
      () => service.close(),
    );
    const client = await connect(service);
    const start = () => client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } });
    payload(await start());
    const waiting = String(payload(await start()).task_id);
    expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: waiting } }))).toMatchObject({
      status: 'pending',
      queue_position: 0,
    });
    expect(await start()).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'QUOTA_EXCEEDED', message: expect.stringMatching(/^Principal anonymous has 1 task waiting, its maxQueued is 1 /) } },
    });
    expect(payload(await client.callTool({ name: 'describe_capabilities', arguments: {} }))).toMatchObject({
      quota: { principal: 'anonymous', quotas: { max_queued: 1 }, use: { running: 1, queued: 1 } },
    });
    // Another caller is not held back.
    const other = await connect(service, { principal: () => 'grynya' });
    expect(payload(await other.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } }))).toMatchObject({ status: 'pending' });
  });

  it("takes the principal from the request's auth info, or from the option given", async () => {
    const service = await taskService();
    const client = await connect(service, { principal: () => 'grynya' });
    const { task_id: taskId } = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'mine' } }));
    expect((await service.tasks.get(String(taskId), { principal: 'grynya' })).principal).toBe('grynya');
    const stranger = await connect(service);
    expect(await stranger.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'TASK_NOT_FOUND' } },
    });
  });

  it('logs the end of a task to the session that started it, at or above the level it set, and to no other', async () => {
    const service = await taskService();
    const starter = await connect(service);
    const bystander = await connect(service);
    const seen = { starter: [] as { level: string; data?: unknown }[], bystander: [] as unknown[] };
    starter.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void seen.starter.push(notification.params));
    bystander.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void seen.bystander.push(notification.params));

    const first = String(payload(await starter.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } })).task_id);
    await expect.poll(() => seen.starter).toContainEqual({ level: 'info', logger: 'klym', data: `task ${first} ended: completed` });

    await starter.setLoggingLevel('error');
    const ok = String(payload(await starter.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } })).task_id);
    const failing = String(payload(await starter.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'fail' } })).task_id);
    await expect.poll(() => seen.starter.map((message) => message.data)).toContainEqual(`task ${failing} ended: error (INTERNAL)`);
    await expect.poll(async () => (await service.tasks.get(ok, { principal: 'anonymous' })).status).toBe('completed');
    expect(seen.starter.map((message) => message.data)).not.toContainEqual(`task ${ok} ended: completed`);
    expect(seen.bystander).toEqual([]);
  });

  it('says why a task was cancelled: a shutdown is logged as "ended: cancelled (shutdown)" and its status carries cancel_reason', async () => {
    const pool: SessionPool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echo) } });
    const store = createMemoryTaskStore();
    const service = createTaskService({ pool, run: hanging, store, shutdownGraceMs: 50 });
    cleanups.push(
      () => pool.close(),
      () => store.close(),
    );
    const client = await connect(service);
    const seen: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void seen.push(notification.params.data));
    const taskId = String(payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'work' } })).task_id);
    await expect.poll(async () => (await service.tasks.get(taskId, { principal: 'anonymous' })).status).toBe('running');

    await service.close();
    await expect.poll(() => seen).toContainEqual(`task ${taskId} ended: cancelled (shutdown)`);
    expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({
      status: 'cancelled',
      cancel_reason: 'shutdown',
    });
  });
});
