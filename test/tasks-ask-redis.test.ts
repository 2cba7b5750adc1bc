// Issue #40 on a shared BullMQ queue over a real redis-server: a question answered in the moment after the run that
// asked last looked at its task and before its job was let go. BullMQ ignores an add under a job id still held; the
// queue's add must not lose the answered task to it.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  ASK_CALLER_TOOL_NAME,
  createMemoryTaskStore,
  createSessionPool,
  createTaskManager,
  runAgent,
  type TaskManager,
  type TaskRecord,
  type TaskStore,
} from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { createBullmqTaskQueue } from '@klym/core/redis';
import { createInMemoryUpstream } from '@klym/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from './support/redis-server.ts';

const me = { principal: 'grynya' };

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
}, 30_000);
afterAll(async () => {
  await redis?.close();
});
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/** Asks which service on its first call; then says what the ask's result was. */
const askingModel = (): ReturnType<typeof createScriptedModel> =>
  createScriptedModel({
    steps: ({ options }) => {
      const results = options.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
      const answer = results.find((part) => part.type === 'tool-result' && part.toolName === ASK_CALLER_TOOL_NAME);
      if (answer === undefined) return { toolCalls: [{ toolName: ASK_CALLER_TOOL_NAME, args: { question: 'Which service, billing or search?' } }] };
      return { text: `The caller said: ${JSON.stringify(answer.type === 'tool-result' ? answer.output : null)}` };
    },
  });

function box(): McpServer {
  const server = new McpServer({ name: 'box', version: '1.0.0' });
  server.registerTool('noop', {}, () => ({ content: [{ type: 'text', text: 'ok' }] }));
  return server;
}

async function openManager(store: TaskStore, queueName: string, maxConcurrent: number): Promise<TaskManager> {
  const pool = await createSessionPool({ upstreams: { box: createInMemoryUpstream(box) } });
  const queue = await createBullmqTaskQueue({ url: redis.url, name: queueName });
  const tasks = createTaskManager({ pool, store, queue, maxConcurrent, run: (options) => runAgent({ ...options, model: askingModel() }) });
  cleanups.push(async () => {
    await tasks.close({ graceMs: 0 });
    await pool.close();
  });
  return tasks;
}

describe('a question answered on a shared queue', () => {
  it('on a shared queue, runs an answered task whose queueing was lost while the asking run ended: the add came while its job was held', async () => {
    const shared = createMemoryTaskStore();
    const queueName = `ask${process.pid}`;
    const front = await openManager(shared, queueName, 0);
    let armed = false;
    // Whether the answer made the task pending while the run still held its job; settled once the reply is in.
    const { promise: answeredMeanwhile, resolve: settle } = Promise.withResolvers<boolean>();
    // The worker's store: the run's last look at its parked task lets the front's answer land before it returns
    // what it read (the task still waiting), so the run ends its job as for a task nobody answered yet.
    const racing: TaskStore = new Proxy(shared, {
      get(target, property, receiver) {
        if (property !== 'get') return Reflect.get(target, property, receiver) as unknown;
        return async (id: string): Promise<TaskRecord | undefined> => {
          const found = await target.get(id);
          if (!armed || found?.status !== 'input_required') return found;
          armed = false;
          await front.reply(id, me, { answer: 'search' });
          settle((await target.get(id))?.status === 'pending');
          return found;
        };
      },
    });
    // The worker that runs the task, through the racing store.
    await openManager(racing, queueName, 1);
    const task = await front.start({ prompt: 'Check the errors of yesterday' }, me);
    armed = true;
    // Polled through the front's store, not the worker's: only the worker's own looks may trip the race.
    await expect.poll(async () => (await front.get(task.id, me)).input?.answer, { timeout: 15_000 }).toBe('search');
    // Not read at once: the poll above can see the answer while the front's reply still queues the task.
    expect(await answeredMeanwhile).toBe(true);
    // Within a few seconds: nothing waits for a timer or a restart to find the task again.
    await expect.poll(async () => (await front.get(task.id, me)).status, { timeout: 3_000, interval: 50 }).toBe('completed');
    const done = await front.get(task.id, me);
    expect(done.result?.finalText).toBe('The caller said: {"type":"text","value":"search"}');
    expect(done.usage.steps).toBe(2);
  }, 30_000);
});
