import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ASK_CALLER_TOOL_NAME } from '../agent/ask-caller.ts';
import { runAgent } from '../agent/run-agent.ts';
import { createScriptedModel, type ScriptedCall } from '../agent/scripted-model.ts';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSqliteTaskStore } from './store/sqlite/sqlite-task-store.ts';
import { createTaskManager } from './task-manager.ts';
import { openManager, waitForStatus as waitFor } from './task-manager.test-support.ts';
import type { TaskManager, TaskManagerOptions } from './task-manager-types.ts';
import type { TaskRecord, TaskStore } from './store/task-types.ts';

const me = { principal: 'grynya' };

/** The model: asks which service on its first call; then says what the ask's result was. */
function askingModel(offered: string[][] = []): ReturnType<typeof createScriptedModel> {
  return createScriptedModel({
    steps: (call: ScriptedCall) => {
      offered.push((call.options.tools ?? []).map((tool) => tool.name));
      const results = call.options.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
      const answer = results.find((part) => part.type === 'tool-result' && part.toolCallId === 'ask-1');
      if (answer === undefined && offered.at(-1)?.includes(ASK_CALLER_TOOL_NAME)) {
        return { toolCalls: [{ toolCallId: 'ask-1', toolName: ASK_CALLER_TOOL_NAME, args: { question: 'Which service, billing or search?' } }] };
      }
      return { text: `The caller said: ${answer === undefined ? 'nothing' : JSON.stringify(answer.type === 'tool-result' ? answer.output : '')}` };
    },
  });
}

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

function boxServer(): McpServer {
  const server = new McpServer({ name: 'box', version: '1.0.0' });
  server.registerTool('noop', {}, () => ({ content: [{ type: 'text', text: 'ok' }] }));
  return server;
}

async function openPool(): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { box: createInMemoryUpstream(boxServer) } });
  cleanups.push(() => pool.close());
  return pool;
}

const open = (pool: SessionPool, model: ReturnType<typeof createScriptedModel>, options: Partial<TaskManagerOptions> = {}): TaskManager =>
  openManager(cleanups, pool, model, options);
const waitForStatus = (manager: TaskManager, id: string, status: TaskRecord['status']): Promise<TaskRecord> => waitFor(manager, me, id, status);

describe('a task that asks its caller', () => {
  it('waits as input_required with its question, holding no slot, and goes on with the answer as the ask’s result', async () => {
    const pool = await openPool();
    const manager = open(pool, askingModel(), { maxConcurrent: 1 });
    const task = await manager.start({ prompt: 'Check the errors of yesterday' }, me);

    const waiting = await waitForStatus(manager, task.id, 'input_required');
    expect(waiting.input).toMatchObject({ question: 'Which service, billing or search?', toolCallId: 'ask-1' });
    // Its slot is free: another task runs meanwhile, on the one runner.
    const other = await manager.start({ prompt: 'Another', askCaller: false }, me);
    await waitForStatus(manager, other.id, 'completed');

    await expect(manager.reply(task.id, { principal: 'mallory' }, { answer: 'billing' })).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(manager.reply(other.id, me, { answer: 'billing' })).rejects.toThrow(`Task ${other.id} is completed, not waiting for input`);
    await manager.reply(task.id, me, { answer: 'billing' });
    await expect(manager.reply(task.id, me, { answer: 'search' })).rejects.toMatchObject({
      code: 'TASK_NOT_WAITING',
      message: expect.stringContaining('already answered'),
    });

    const done = await waitForStatus(manager, task.id, 'completed');
    expect(done.result?.finalText).toBe('The caller said: {"type":"text","value":"billing"}');
    expect(done.usage.steps).toBe(2);
  });

  // A question answered while the asking run still held its job on a shared queue: test/tasks-ask-redis.test.ts, on BullMQ.

  it('ends a task nobody answered as INPUT_TIMEOUT on the running manager’s own check, by its clock; one answered in time goes on', async () => {
    const pool = await openPool();
    let clock = Date.parse('2026-03-01T10:00:00Z');
    const events: string[] = [];
    // A check a second (the time-out's, under the default minute): the clock says when a wait is over.
    const manager = open(pool, askingModel(), {
      now: () => clock,
      inputTimeoutMs: 1_000,
      onEvent: (event) => events.push(`${event.type} ${event.task.id} ${event.task.status}`),
    });
    const unanswered = await manager.start({ prompt: 'Check the errors' }, me);
    const answered = await manager.start({ prompt: 'Check the errors again' }, me);
    await waitForStatus(manager, unanswered.id, 'input_required');
    await waitForStatus(manager, answered.id, 'input_required');
    clock += 999;
    await manager.reply(answered.id, me, { answer: 'billing' });
    clock += 2;
    const ended = await waitForStatus(manager, unanswered.id, 'error');
    expect(ended.error).toEqual({
      code: 'INPUT_TIMEOUT',
      message: `Task ${unanswered.id} asked its caller a question and no answer came within 1000 ms (tasks.inputTimeoutMs)`,
    });
    expect(ended.finishedAt).toBeDefined();
    expect(events).toContain(`task-end ${unanswered.id} error`);
    const types = (await manager.logs(unanswered.id, me, { limit: 100 })).entries.map((entry) => entry.type);
    expect(types).toEqual(expect.arrayContaining(['input-required', 'task-end']));
    expect(types).not.toContain('input-answered');
    expect((await waitForStatus(manager, answered.id, 'completed')).result?.finalText).toBe('The caller said: {"type":"text","value":"billing"}');
  });

  it('does not offer klym__ask_caller to a task started with askCaller: false, nor under askCaller: false', async () => {
    const pool = await openPool();
    const offered: string[][] = [];
    const manager = open(pool, askingModel(offered));
    const off = await manager.start({ prompt: 'No questions', askCaller: false }, me);
    expect((await waitForStatus(manager, off.id, 'completed')).result?.finalText).toBe('The caller said: nothing');
    expect(offered[0]).toContain('klym__read_artifact');
    expect(offered[0]).not.toContain(ASK_CALLER_TOOL_NAME);

    const serverOff = open(pool, askingModel(offered), { askCaller: false });
    const task = await serverOff.start({ prompt: 'No questions either' }, me);
    await waitForStatus(serverOff, task.id, 'completed');
    expect(offered.at(-1)).not.toContain(ASK_CALLER_TOOL_NAME);
  });

  describe('on SQLite, across a restart', () => {
    let directory: string;
    const openStore = async (): Promise<TaskStore> => {
      const store = await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') });
      return store;
    };

    it('keeps waiting, and is answered after the restart', async () => {
      directory = mkdtempSync(path.join(tmpdir(), 'klym-ask-'));
      cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
      const pool = await openPool();
      const firstStore = await openStore();
      const first = createTaskManager({ pool, store: firstStore, run: (options) => runAgent({ ...options, model: askingModel() }) });
      const task = await first.start({ prompt: 'Check the errors' }, me);
      await waitForStatus(first, task.id, 'input_required');
      await first.close({ graceMs: 0 });
      await firstStore.close();

      const store = await openStore();
      cleanups.push(() => store.close());
      const second = open(pool, askingModel(), { store });
      expect((await second.get(task.id, me)).status).toBe('input_required');
      await second.reply(task.id, me, { answer: 'search' });
      const done = await waitForStatus(second, task.id, 'completed');
      expect(done.result?.finalText).toBe('The caller said: {"type":"text","value":"search"}');
    });

    it('ends as INPUT_TIMEOUT when no answer came within inputTimeoutMs, by the manager’s clock, after a restart too', async () => {
      directory = mkdtempSync(path.join(tmpdir(), 'klym-ask-'));
      cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
      const pool = await openPool();
      let clock = Date.parse('2026-03-01T10:00:00Z');
      const now = (): number => clock;
      const firstStore = await openStore();
      const first = createTaskManager({
        pool,
        store: firstStore,
        now,
        inputTimeoutMs: 3_600_000,
        run: (options) => runAgent({ ...options, model: askingModel() }),
      });
      const task = await first.start({ prompt: 'Check the errors' }, me);
      expect((await waitForStatus(first, task.id, 'input_required')).input?.askedAt).toBe('2026-03-01T10:00:00.000Z');
      await first.close({ graceMs: 0 });
      await firstStore.close();

      const store = await openStore();
      cleanups.push(() => store.close());
      clock += 3_599_000;
      const second = open(pool, askingModel(), { store, now, inputTimeoutMs: 3_600_000 });
      await second.list(me); // opened: its first check is done
      expect((await second.get(task.id, me)).status).toBe('input_required');
      await second.close({ graceMs: 0 });

      clock += 2_000;
      const third = open(pool, askingModel(), { store, now, inputTimeoutMs: 3_600_000 });
      const ended = await waitForStatus(third, task.id, 'error');
      expect(ended.error).toEqual({
        code: 'INPUT_TIMEOUT',
        message: `Task ${task.id} asked its caller a question and no answer came within 3600000 ms (tasks.inputTimeoutMs)`,
      });
      await expect(third.reply(task.id, me, { answer: 'late' })).rejects.toThrow(`Task ${task.id} is error, not waiting for input`);
    });
  });
});
