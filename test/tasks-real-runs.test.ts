import path from 'node:path';
import { createSessionPool, createTaskManager, runAgent, type AgentRunner, type SessionPool, type TaskManager } from '@klym/core';
import { PROMPT_PROVENANCE_CHARS, createScriptedModel, dayIdOf, type ScriptedStep } from '@klym/core/internal';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it } from 'vitest';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };

/** The real runAgent, with a scripted model that answers `steps` in order. */
const scripted =
  (steps: readonly ScriptedStep[]): AgentRunner =>
  (options) =>
    runAgent({ ...options, model: createScriptedModel({ steps }) });

async function grynyaPool(): Promise<{ grynya: FakeGrynya; pool: SessionPool }> {
  const grynya = await createFakeGrynya();
  const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
  cleanups.push(
    () => grynya.close(),
    () => pool.close({ drainTimeoutMs: 100 }),
  );
  return { grynya, pool };
}

function manager(options: Parameters<typeof createTaskManager>[0]): TaskManager {
  const tasks = createTaskManager(options);
  cleanups.push(() => tasks.close({ graceMs: 0 }));
  return tasks;
}

async function ended(tasks: TaskManager, id: string): Promise<Awaited<ReturnType<TaskManager['get']>>> {
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 10_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

describe('tasks run by the real agent loop', () => {
  it("keeps what an upstream logged while serving the task's calls in the task's log", async () => {
    const fixture = path.join(import.meta.dirname, 'support', 'stdio-fixture-server.ts');
    const pool = await createSessionPool({ upstreams: { fixture: { command: process.execPath, args: ['--conditions=klym-source', fixture] } } });
    cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
    const tasks = manager({
      pool,
      run: scripted([{ toolCalls: [{ toolName: 'fixture__log', args: { message: 'hello from the fixture' } }] }, { text: 'logged it' }]),
    });
    const task = await tasks.start({ prompt: 'log something' }, me);
    expect((await ended(tasks, task.id)).status).toBe('completed');
    const { entries } = await tasks.logs(task.id, me, { limit: 500 });
    const upstreamLogs = entries.filter((entry) => entry.type === 'upstream-log').map((entry) => entry.data);
    expect(upstreamLogs).toContainEqual(expect.objectContaining({ upstream: 'fixture', source: 'stderr', message: 'stderr says hello from the fixture' }));
    expect(upstreamLogs).toContainEqual(expect.objectContaining({ upstream: 'fixture', source: 'notification', level: 'warning' }));
    expect(entries.map((entry) => entry.type)).toEqual(
      expect.arrayContaining(['task-create', 'task-start', 'run-start', 'tool-call', 'tool-result', 'run-end', 'task-end']),
    );
  });

  it('ends a run that spends its step budget as completed with "budget:steps" and its partial text', async () => {
    const { pool } = await grynyaPool();
    const probe: ScriptedStep = { text: 'still looking', toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] };
    const tasks = manager({ pool, run: scripted([probe, probe, probe]) });
    const task = await tasks.start({ prompt: 'look forever', budget: { maxSteps: 1 } }, me);
    const done = await ended(tasks, task.id);
    expect(done).toMatchObject({ status: 'completed', result: { finishReason: 'budget:steps', text: expect.stringContaining('still looking') } });
    expect(done.usage.steps).toBe(1);
  });

  it('writes the result into the graph as an Analysis node linked to its day', async () => {
    const { grynya, pool } = await grynyaPool();
    const tasks = manager({ pool, run: scripted([{ text: 'The graph is fine.' }]), writeBack: { byDefault: true, timeZone: 'Europe/Kyiv' } });
    const task = await tasks.start({ prompt: 'analyse' }, me);
    await expect.poll(async () => (await tasks.get(task.id, me)).writeBack?.status, { timeout: 10_000 }).toBe('written');
    const done = await tasks.get(task.id, me);
    const node = grynya.graph.nodes.get(`klym_${task.id}`);
    // The node says where its text came from: what was asked, by whom, of which model, and how the run ended.
    expect(node).toMatchObject({
      label: 'Analysis',
      properties: {
        full_text: 'The graph is fine.',
        time: done.finishedAt,
        prompt: 'analyse',
        model: done.result?.model,
        principal: 'grynya',
        finish_reason: 'stop',
        partial: false,
      },
    });
    const day = dayIdOf(new Date(done.finishedAt as string), 'Europe/Kyiv');
    expect(done.writeBack).toEqual({ status: 'written', nodeId: `klym_${task.id}`, dayId: day });
    expect(grynya.graph.relations).toContainEqual(expect.objectContaining({ type: 'HAPPENED_AT', from: `klym_${task.id}`, to: day }));
  });

  it('marks a result a budget cut short as partial in the graph, and keeps only the start of a long prompt', async () => {
    const { grynya, pool } = await grynyaPool();
    const probe: ScriptedStep = { text: 'half way there', toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] };
    const tasks = manager({ pool, run: scripted([probe, probe]), writeBack: { byDefault: true } });
    const prompt = `Find every session without a LAST_EVENT. ${'Context. '.repeat(200)}`;
    const task = await tasks.start({ prompt, budget: { maxSteps: 1 } }, me);
    await expect.poll(async () => (await tasks.get(task.id, me)).writeBack?.status, { timeout: 10_000 }).toBe('written');
    const { properties } = grynya.graph.nodes.get(`klym_${task.id}`) as { properties: Record<string, unknown> };
    // The graph's copy of the answer says first that it is partial, as every other door's does.
    expect(properties).toMatchObject({
      finish_reason: 'budget:steps',
      partial: true,
      full_text: 'Stopped by the budget (max_steps 1: 1 step taken) before the work was done: this answer is partial.\n\nhalf way there',
    });
    expect(String(properties.prompt)).toMatch(/^Find every session without a LAST_EVENT\. Context\. .*…$/);
    expect(String(properties.prompt).length).toBeLessThanOrEqual(PROMPT_PROVENANCE_CHARS);
    // Graph properties are flat: strings and booleans only, nothing nested.
    expect(Object.values(properties).every((value) => ['string', 'boolean'].includes(typeof value))).toBe(true);
  });

  it('reads a write that grynya answered with {"status":"error"} as failed, and keeps the result', async () => {
    const { grynya, pool } = await grynyaPool();
    const tasks = manager({ pool, run: scripted([{ text: 'An analysis worth keeping.' }]) });
    grynya.faults.error = 'DB disconnected';
    const task = await tasks.start({ prompt: 'analyse', recordResult: true }, me);
    await expect.poll(async () => (await tasks.get(task.id, me)).writeBack?.status, { timeout: 10_000 }).toBe('failed');
    const done = await tasks.get(task.id, me);
    expect(done).toMatchObject({
      status: 'completed',
      result: { text: 'An analysis worth keeping.' },
      writeBack: { error: expect.stringMatching(/DB disconnected/) },
    });
    expect(grynya.graph.nodes.has(`klym_${task.id}`)).toBe(false);
  });

  it('does not write back unless asked', async () => {
    const { grynya, pool } = await grynyaPool();
    const tasks = manager({ pool, run: scripted([{ text: 'private' }]) });
    const task = await tasks.start({ prompt: 'analyse' }, me);
    const done = await ended(tasks, task.id);
    expect(done.status).toBe('completed');
    expect(done.writeBack).toBeUndefined();
    expect(grynya.stats.calls.add_node ?? 0).toBe(0);
  });
});

describe('dayIdOf', () => {
  it('names the calendar day in the given time zone', () => {
    const late = new Date('2026-03-01T23:30:00Z');
    expect(dayIdOf(late)).toBe('d_2026_03_01');
    expect(dayIdOf(late, 'Europe/Kyiv')).toBe('d_2026_03_02');
  });
});
