// Issue #11, item 10: an upstream that keeps state per session must not leak it between tasks. Two
// principals' tasks run concurrently through the real task manager, the real agent loop and the pool.
import { createSessionPool, createTaskManager, runAgent, type SessionPool, type TaskManager, type TaskRecord, type UpstreamConfig } from '@klym/core';
import { createInMemoryUpstream, createMockModel, mockTurnParts, textUntilAborted, type MockStep, type MockTurn } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { toolResultsIn } from './support/mock-model.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/**
 * An upstream that keeps a value per session, as a browser or a shell keeps its state: `set`, `get`, and
 * `hang` (answers only when cancelled). It counts sessions open now and at most, and closed ones.
 */
function statefulUpstream(sessionScope: UpstreamConfig['sessionScope'], max: number) {
  const seen = { live: 0, mostLive: 0, closed: 0, hanging: 0 };
  const serve = (): McpServer => {
    const server = new McpServer({ name: 'stateful', version: '1.0.0' });
    let value = '';
    seen.mostLive = Math.max(seen.mostLive, ++seen.live);
    server.server.onclose = () => {
      seen.live--;
      seen.closed++;
    };
    server.registerTool('set', { inputSchema: { value: z.string() } }, (args) => {
      value = args.value;
      return { content: [{ type: 'text', text: `set ${value}` }] };
    });
    server.registerTool('get', {}, () => ({ content: [{ type: 'text', text: `holds "${value}"` }] }));
    server.registerTool('hang', {}, (extra) => {
      seen.hanging++;
      return new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ content: [] }), { once: true }));
    });
    return server;
  };
  const config = createInMemoryUpstream(serve, { pool: { max }, ...(sessionScope === undefined ? {} : { sessionScope }) });
  return { seen, config };
}

const textOf = (result: CallToolResult): string => (result.content[0]?.type === 'text' ? result.content[0].text : '');

type StreamResult = ReturnType<Extract<MockStep, (...args: never[]) => unknown>>;
const turn = (parts: MockTurn): StreamResult => ({ stream: ReadableStream.from(mockTurnParts(parts)) });

/**
 * The model of a task whose prompt is a value: it sets the value (once `setAfter` resolves), reads it back
 * (once `getAfter` resolves) and answers with what it read. `onSet`/`onGet` run when the call's result is
 * back, so its session has been given back by then.
 */
function rememberingModel(value: string, order: { setAfter?: Promise<void>; getAfter?: Promise<void>; onSet?: () => void; onGet?: () => void } = {}) {
  return createMockModel([
    async () => {
      await order.setAfter;
      return turn({ toolCalls: [{ id: 'set', name: 'state__set', args: { value } }] });
    },
    async () => {
      order.onSet?.();
      await order.getAfter;
      return turn({ toolCalls: [{ id: 'get', name: 'state__get' }] });
    },
    (options) => {
      order.onGet?.();
      return turn({ text: toolResultsIn(options).get('get')?.text ?? 'no result' });
    },
  ]);
}

/** Alice's and Bob's models, their calls one after the other: Alice sets, Bob sets, Alice reads, Bob reads. */
function interleaved(): Record<string, ReturnType<typeof createMockModel>> {
  const [aliceSet, bobSet, aliceGet] = [Promise.withResolvers<void>(), Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  return {
    alpha: rememberingModel('alpha', { getAfter: bobSet.promise, onSet: aliceSet.resolve, onGet: aliceGet.resolve }),
    beta: rememberingModel('beta', { setAfter: aliceSet.promise, getAfter: aliceGet.promise, onSet: bobSet.resolve }),
  };
}

async function tasksOver(
  upstream: UpstreamConfig,
  models: Record<string, ReturnType<typeof createMockModel>>,
): Promise<{ pool: SessionPool; tasks: TaskManager }> {
  const pool = await createSessionPool({ upstreams: { state: upstream } });
  const tasks = createTaskManager({
    pool,
    run: (options) => runAgent({ ...options, ...(models[options.prompt] === undefined ? {} : { model: models[options.prompt] }) }),
  });
  cleanups.push(
    () => pool.close(),
    () => tasks.close({ graceMs: 0 }),
  );
  return { pool, tasks };
}

async function ended(tasks: TaskManager, task: TaskRecord, principal: string): Promise<TaskRecord> {
  await vi.waitFor(async () => expect((await tasks.get(task.id, { principal })).status).not.toMatch(/pending|running/), { timeout: 5_000 });
  return tasks.get(task.id, { principal });
}

/** Alice's task remembers `alpha`, Bob's `beta`, started at once; their records once both ended. */
async function aliceAndBob(tasks: TaskManager): Promise<TaskRecord[]> {
  const [alice, bob] = await Promise.all([tasks.start({ prompt: 'alpha' }, { principal: 'alice' }), tasks.start({ prompt: 'beta' }, { principal: 'bob' })]);
  return [await ended(tasks, alice, 'alice'), await ended(tasks, bob, 'bob')];
}

describe('tasks on an upstream that keeps state per session', () => {
  it('shared (the default): Alice’s task reads the value Bob’s task set — the leak', async () => {
    // One session, so that both tasks are certain to share it.
    const upstream = statefulUpstream(undefined, 1);
    const { tasks } = await tasksOver(upstream.config, interleaved());
    const done = await aliceAndBob(tasks);
    expect(done.map((task) => task.result?.finalText)).toEqual(['holds "beta"', 'holds "beta"']);
  });

  it('task: each task reads only its own value, on a session of its own that closes when the task ends', async () => {
    const upstream = statefulUpstream('task', 2);
    const { pool, tasks } = await tasksOver(upstream.config, interleaved());
    const done = await aliceAndBob(tasks);
    expect(done.map((task) => [task.status, task.result?.finalText])).toEqual([
      ['completed', 'holds "alpha"'],
      ['completed', 'holds "beta"'],
    ]);
    await vi.waitFor(() => expect(upstream.seen.closed).toBe(2));
    expect(upstream.seen.mostLive).toBe(2);
    expect(pool.status().state?.sessions.borrowed).toBe(0);
  });

  it('task: with `pool.max` 1 the second task waits for the first one’s session to close, then gets a fresh one', async () => {
    const upstream = statefulUpstream('task', 1);
    const { tasks } = await tasksOver(upstream.config, { alpha: rememberingModel('alpha'), beta: rememberingModel('beta') });
    const done = await aliceAndBob(tasks);
    expect(done.map((task) => task.result?.finalText)).toEqual(['holds "alpha"', 'holds "beta"']);
    expect(upstream.seen.mostLive).toBe(1);
    await vi.waitFor(() => expect(upstream.seen.closed).toBe(2));
  });

  it('task: a task cancelled while its session sits idle has that session closed', async () => {
    const upstream = statefulUpstream('task', 1);
    const pool = await createSessionPool({ upstreams: { state: upstream.config } });
    const thinking = Promise.withResolvers<void>();
    const model = createMockModel([
      { toolCalls: [{ id: 'set', name: 'state__set', args: { value: 'alpha' } }] },
      textUntilAborted('thinking…', thinking.resolve),
    ]);
    const tasks = createTaskManager({ pool, run: (options) => runAgent({ ...options, model }) });
    cleanups.push(
      () => pool.close(),
      () => tasks.close({ graceMs: 0 }),
    );
    const task = await tasks.start({ prompt: 'remember alpha' }, { principal: 'alice' });
    await thinking.promise;
    expect(upstream.seen).toMatchObject({ live: 1, closed: 0 });
    await tasks.cancel(task.id, { principal: 'alice' });
    await vi.waitFor(() => expect(upstream.seen.closed).toBe(1));
    expect((await tasks.get(task.id, { principal: 'alice' })).status).toBe('cancelled');
    expect(textOf(await pool.callTool('state', 'get'))).toBe('holds ""');
  });
});
