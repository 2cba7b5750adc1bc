import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/server';
import { CallToolResultSchema, CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { connectInMemory } from '../../../../test/support/in-memory-client.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionPool } from '../pool/session-pool.ts';
import type { AgentRunner } from '../tasks/task-manager-types.ts';
import { createTaskService, type TaskService } from '../tasks/task-service.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { runResult } from '../testing/run-result.ts';
import { createMcpTaskStore } from './mcp-task-store.ts';
import { MCP_TASKS_CAPABILITY, registerAgentTaskTool } from './register-agent-task-tool.ts';
import { registerTaskTools } from './register-task-tools.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const quick: AgentRunner = async () => runResult('fine');

/** A run that goes on until it is aborted. */
const hanging: AgentRunner = (options) =>
  new Promise((_, reject) => options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true }));

function echo(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

async function taskService(options: { maxQueued?: number; maxConcurrent?: number; run?: AgentRunner } = {}): Promise<TaskService> {
  const pool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echo) } });
  const service = createTaskService({ pool, run: quick, shutdownGraceMs: 0, ...options });
  cleanups.push(
    () => pool.close(),
    () => service.close(),
  );
  await pool.warmedUp();
  return service;
}

/** Another agent's McpServer serving Klym's tasks as MCP tasks for `principal`, and the SDK client on it. */
async function connect(service: TaskService, principal: string): Promise<Client> {
  const taskStore = createMcpTaskStore(service, { principal });
  const server = new McpServer({ name: 'another-agent', version: '1.0.0' }, { capabilities: { tasks: MCP_TASKS_CAPABILITY } });
  registerTaskTools(server, service, { principal: () => principal });
  registerAgentTaskTool(server, service, taskStore);
  const client = await connectInMemory(server);
  cleanups.push(() => client.close());
  return client;
}

const runAgentTask = (client: Client, args: Record<string, unknown>) =>
  client.request({ method: 'tools/call', params: { name: 'run_agent_task', arguments: args, task: {} } }, CreateTaskResultSchema);

describe('run_agent_task on any McpServer', () => {
  it('answers a start it cannot make with the JSON-RPC error naming what was wrong', async () => {
    const client = await connect(await taskService(), 'grynya');
    const refused = await runAgentTask(client, { prompt: 'hi', model: 'gpt-9' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(McpError);
    expect(refused).toMatchObject({ code: -32602, message: expect.stringMatching(/`model`.*gpt-9/) });
    const missing = await runAgentTask(client, {}).catch((error: unknown) => error);
    expect(missing).toMatchObject({ code: -32602, message: expect.stringMatching(/Invalid arguments for tool run_agent_task: prompt: /) });
  });

  it('answers a start past the queue bound with TASK_QUEUE_FULL', async () => {
    const service = await taskService({ maxQueued: 1, maxConcurrent: 1, run: hanging });
    const client = await connect(service, 'grynya');
    await runAgentTask(client, { prompt: 'runs' });
    await expect.poll(async () => (await service.tasks.summary()).running).toBe(1);
    await runAgentTask(client, { prompt: 'waits' });
    const refused = await runAgentTask(client, { prompt: 'one too many' }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: -32603, message: expect.stringMatching(/TASK_QUEUE_FULL: /), data: { code: 'TASK_QUEUE_FULL' } });
  });

  it("shows one principal's tasks to its store, started either way, and none of another's", async () => {
    const service = await taskService();
    const grynya = await connect(service, 'grynya');
    const other = await connect(service, 'other');
    const { task } = await runAgentTask(grynya, { prompt: 'hi' });
    const started = await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'hello' } });
    const startedId = (started.structuredContent as { task_id: string }).task_id;
    await expect.poll(async () => (await grynya.experimental.tasks.getTask(startedId)).status).toBe('completed');
    expect((await grynya.experimental.tasks.listTasks()).tasks.map((listed) => listed.taskId).toSorted()).toEqual([task.taskId, startedId].toSorted());
    expect(await grynya.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({ content: [{ type: 'text', text: 'fine' }] });
    expect((await other.experimental.tasks.listTasks()).tasks).toEqual([]);
    await expect(other.experimental.tasks.getTask(task.taskId)).rejects.toMatchObject({ code: -32602 });
  });
});
