import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentCheckpoint, AgentRunResult, RunAgentOptions } from '../agent/types.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import { runResult } from '../testing/run-result.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import { createTaskManager } from './task-manager.ts';
import type { AgentRunner, TaskManager } from './task-manager-types.ts';
import type { TaskRecord, TaskStore } from './store/task-types.ts';

const me = { principal: 'grynya' };
const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15, estimated: false };
const result = (text: string): AgentRunResult => runResult(text, { text: `narration\n\n${text}`, steps: 2, usage, model: 'test:model', elapsedMs: 5 });

/** A runner that records its options and completes at once. */
function recordingRunner(): { run: AgentRunner; calls: RunAgentOptions[] } {
  const calls: RunAgentOptions[] = [];
  return { calls, run: async (options) => (calls.push(options), result(`answer to ${options.prompt}`)) };
}

const record = (id: string, status: TaskRecord['status'], extra: Partial<TaskRecord> = {}): TaskRecord => ({
  id,
  principal: me.principal,
  request: { prompt: id },
  status,
  createdAt: new Date(Date.now() - 60_000).toISOString(),
  currentStep: status,
  usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
  ...extra,
});

const checkpoint: AgentCheckpoint = {
  steps: 2,
  messages: [{ role: 'user', content: 'running-1' }],
  texts: ['looked around'],
  usage,
  elapsedMs: 1_500,
  toolCalls: 1,
  current: { step: 3, text: '', calls: [{ toolCallId: 'call-1', toolName: 'grynya__add_node', input: { node_type: 'X' } }] },
};

/** A store as a process that died left it: one running task with a checkpoint, two pending, one mid write-back. */
async function storeLeftByACrash(): Promise<TaskStore> {
  const store = createMemoryTaskStore();
  await store.insert(record('pending-old', 'pending'));
  await store.insert(record('running-1', 'running', { startedAt: new Date().toISOString() }));
  await store.insert(record('pending-new', 'pending'));
  await store.insert(
    record('writing', 'completed', { finishedAt: new Date().toISOString(), writeBack: { status: 'pending', nodeId: 'klym_writing', dayId: '' } }),
  );
  store.saveCheckpoint('running-1', checkpoint);
  return store;
}

let manager: TaskManager | undefined;
afterEach(async () => {
  await manager?.close({ graceMs: 0 });
  manager = undefined;
});
const pool = { upstreams: [], openScope: () => ({ close: async () => {} }) } as unknown as SessionPool;

describe('createTaskManager over a store a dead process left', () => {
  it('resumes running tasks from their checkpoint first, then runs pending ones oldest first', async () => {
    const store = await storeLeftByACrash();
    const runner = recordingRunner();
    manager = createTaskManager({ pool, run: runner.run, store, maxConcurrent: 1 });
    await vi.waitFor(() => expect(runner.calls).toHaveLength(3));
    expect(runner.calls.map((call) => call.prompt)).toEqual(['running-1', 'pending-old', 'pending-new']);
    expect(runner.calls[0]?.resume).toEqual(checkpoint);
    expect(runner.calls[1]?.resume).toBeUndefined();

    await vi.waitFor(async () => expect((await manager!.get('pending-new', me)).status).toBe('completed'));
    const resumed = await manager.get('running-1', me);
    expect(resumed).toMatchObject({ status: 'completed', resumes: [2], result: { finalText: 'answer to running-1' } });
    const log = await manager.logs('running-1', me);
    expect(log.entries.find((entry) => entry.type === 'task-resume')?.data).toEqual({ fromStep: 2, interruptedCalls: ['grynya__add_node'] });
  });

  it('never writes back twice: a write-back under way when the process died is reported as of unknown outcome', async () => {
    const store = await storeLeftByACrash();
    manager = createTaskManager({ pool, run: recordingRunner().run, store });
    await vi.waitFor(async () => expect((await manager!.get('writing', me)).writeBack?.status).toBe('failed'));
    expect((await manager.get('writing', me)).writeBack?.error).toMatch(/may or may not have been written; it was not written again/);
  });

  it('with resumeOnRestart off, ends running tasks as TASK_INTERRUPTED with their log intact', async () => {
    const store = await storeLeftByACrash();
    store.appendLog('running-1', 'step-start', { step: 1 });
    const runner = recordingRunner();
    manager = createTaskManager({ pool, run: runner.run, store, resumeOnRestart: false });
    await vi.waitFor(async () => expect((await manager!.get('running-1', me)).status).toBe('error'));
    expect((await manager.get('running-1', me)).error).toMatchObject({ code: 'TASK_INTERRUPTED', message: expect.stringContaining('after step 2') });
    expect((await manager.logs('running-1', me)).entries.map((entry) => entry.type)).toEqual(['step-start', 'task-end']);
    await vi.waitFor(() => expect(runner.calls.map((call) => call.prompt)).toEqual(['pending-old', 'pending-new']));
  });

  it('saves every checkpoint of a run in the store, and writes the final answer back, not the narration', async () => {
    const store = createMemoryTaskStore();
    const saved: AgentCheckpoint[] = [];
    const run: AgentRunner = async (options) => {
      options.onCheckpoint?.(checkpoint);
      const [only] = (await store.list()).tasks;
      saved.push((await store.loadCheckpoint(only?.id ?? '')) as AgentCheckpoint);
      return result('the answer');
    };
    const calls: { tool: string; args: Record<string, unknown> }[] = [];
    const writingPool = {
      upstreams: ['grynya'],
      openScope: () => ({ close: async () => {} }),
      callTool: async (_upstream: string, tool: string, args: Record<string, unknown>) => (
        calls.push({ tool, args }),
        { content: [{ type: 'text', text: '{"status":"success"}' }] }
      ),
    } as unknown as SessionPool;
    manager = createTaskManager({ pool: writingPool, run, store });
    const task = await manager.start({ prompt: 'x', recordResult: true }, me);
    await vi.waitFor(async () => expect((await manager!.get(task.id, me)).writeBack?.status).toBe('written'));
    expect(saved).toEqual([checkpoint]);
    expect(calls[0]?.args).toMatchObject({ node_data: { full_text: 'the answer' } });
  });
});

describe('TaskManager.start with an idempotency key', () => {
  it('answers the existing task for the same principal and key, whatever its status, and a new one for another principal', async () => {
    const runner = recordingRunner();
    manager = createTaskManager({ pool, run: runner.run });
    const first = await manager.start({ prompt: 'once', idempotencyKey: 'k-1' }, me);
    await vi.waitFor(async () => expect((await manager!.get(first.id, me)).status).toBe('completed'));
    const again = await manager.start({ prompt: 'once', idempotencyKey: 'k-1' }, me);
    expect(again).toMatchObject({ id: first.id, status: 'completed' });
    const concurrent = await Promise.all([1, 2, 3].map(() => manager!.start({ prompt: 'race', idempotencyKey: 'k-2' }, me)));
    expect(new Set(concurrent.map((task) => task.id)).size).toBe(1);
    const theirs = await manager.start({ prompt: 'once', idempotencyKey: 'k-1' }, { principal: 'mallory' });
    expect(theirs.id).not.toBe(first.id);
    await vi.waitFor(() => expect(runner.calls).toHaveLength(3));
  });
});

describe('TaskManager.list', () => {
  it('pages the caller’s tasks newest first with a cursor, down to the oldest', async () => {
    manager = createTaskManager({ pool, run: recordingRunner().run });
    const started: string[] = [];
    for (let index = 0; index < 120; index++) started.push((await manager.start({ prompt: `t${index}` }, me)).id);
    await manager.start({ prompt: 'not mine' }, { principal: 'mallory' });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await manager.list(me, {}, { limit: 50, ...(cursor === undefined ? {} : { cursor }) });
      expect(page.total).toBe(120);
      seen.push(...page.tasks.map((task) => task.id));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(seen).toEqual(started.toReversed());
    await expect(manager.list(me, {}, { cursor: 'not-a-cursor' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
