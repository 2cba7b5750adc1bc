// Issue #39: heavy data behind walls. DuckDB runs only in query processes: whatever SQL a model (or a prompt
// injection in a log line) sends, the serving process grows by about a page, a query past its memory kills
// its own process only, long queries leave this process's thread pool free, and a caller that goes away
// interrupts its query.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { createSessionPool, createTaskManager, runAgent, type AgentRunner, type TaskManager } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { payload, startHarness, type ServerHarness } from './support/server-harness.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const done: AgentRunner = (options) => runAgent({ ...options, model: createScriptedModel({ steps: () => ({ text: 'done' }) }) });
/** Minutes of work for DuckDB, and no table: it stops only when interrupted. */
const FOREVER = 'SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3';

async function manager(artifactQuery: Parameters<typeof createTaskManager>[0]['artifactQuery'], run: AgentRunner = done): Promise<TaskManager> {
  const pool = await createSessionPool({ upstreams: {} });
  const tasks = createTaskManager({ pool, run, artifactQuery });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  cleanups.push(() => tasks.close({ graceMs: 0 }));
  return tasks;
}

async function finished(tasks: TaskManager): Promise<string> {
  const task = await tasks.start({ prompt: 'nothing to do' }, me);
  await expect.poll(async () => (await tasks.get(task.id, me)).status, { timeout: 20_000 }).toBe('completed');
  return task.id;
}

/** The highest resident memory of this process while `work` runs, less what it had before, in MiB. */
async function growthWhile<T>(work: () => Promise<T>): Promise<{ result: T; growthMiB: number }> {
  globalThis.gc?.();
  const before = process.memoryUsage.rss();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { result, growthMiB: (peak - before) / 2 ** 20 };
  } finally {
    clearInterval(sampler);
  }
}

const TOKEN = 'the-token-of-grynya-123456';

/** Klym serving over HTTP, Grynya connected, and a finished task of Grynya's; queries may run ten minutes. */
async function servedTask(): Promise<{ harness: ServerHarness; grynya: Client; taskId: string }> {
  const harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: done, artifactQuery: { timeoutMs: 600_000 } } });
  cleanups.push(() => harness.cleanup());
  const grynya = await harness.connect('streamable-http', TOKEN);
  const { task_id: taskId } = payload(await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'nothing' } })) as { task_id: string };
  await expect.poll(async () => payload(await grynya.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).status).toBe('completed');
  return { harness, grynya, taskId };
}

describe('a query behind walls', () => {
  it('answers 250,000 rows of 10 KB (2.5 GB) counted and a page long, and this process grows by less than 64 MiB', async () => {
    // At the default limits: the query process reads the stream a chunk at a time, so it stays under 512 + 256 MiB too.
    const tasks = await manager({});
    const taskId = await finished(tasks);
    await tasks.queryArtifacts(taskId, me, 'SELECT 1'); // the query process is up: its start is not the answer's growth
    const { result: answer, growthMiB } = await growthWhile(() =>
      tasks.queryArtifacts(taskId, me, "SELECT repeat('x', 10000) || range::VARCHAR AS line FROM range(250000)"),
    );
    expect(answer.rowCount).toBe(250_000);
    expect(answer.rowCountExact).toBe(true);
    // The page (64 KiB of rows by default) holds 6 of them; the first row is whole.
    expect(answer.rows.length).toBeGreaterThan(0);
    expect(answer.rows.length).toBeLessThan(10);
    expect(answer.rows[0]).toEqual([`${'x'.repeat(10_000)}0`]);
    expect(growthMiB).toBeLessThan(64);
    console.log(`250,000 rows of 10 KB: this process grew ${growthMiB.toFixed(1)} MiB`);
  });

  it('kills a query process past memoryMiB, fails that query naming the limit, and every other task goes on', async () => {
    const tasks = await manager({ memoryMiB: 512, processes: 2 });
    const [bomber, other] = [await finished(tasks), await finished(tasks)];
    await tasks.queryArtifacts(other, me, 'SELECT 1');
    // A string DuckDB's memory_limit does not count: 1.5 GB and more, three times over.
    const bomb = tasks.queryArtifacts(bomber, me, "SELECT sum(length(repeat('x', 1500000000 + range))) FROM range(3)");
    const meanwhile = tasks.queryArtifacts(other, me, 'SELECT sum(range) FROM range(1000000)');
    const error = await bomb.catch((caught: unknown) => caught);
    expect(error).toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringMatching(/more memory than a query process may use: 512 MiB \(`memoryMiB`\) plus 256 MiB.*its process was killed/),
    });
    expect((await meanwhile).rows).toEqual([[499_999_500_000]]);
    // The next query of the same task gets a fresh process.
    expect((await tasks.queryArtifacts(bomber, me, 'SELECT 41 + 1')).rows).toEqual([[42]]);
  });

  it('leaves this process free while 8 long queries run: a file read and a task status answer before any of them ends', async () => {
    const tasks = await manager({ timeoutMs: 600_000 });
    const ids = await Promise.all(Array.from({ length: 8 }, () => finished(tasks)));
    const controller = new AbortController();
    let settled = 0;
    const queries = ids.map((id) =>
      tasks.queryArtifacts(id, me, FOREVER, { signal: controller.signal }).then(
        () => settled++,
        () => settled++,
      ),
    );
    // Two run (two query processes), six wait their turn; this process's thread pool is its own.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const text = await readFile(new URL(import.meta.url), 'utf8');
    const status = await tasks.get(ids[0] as string, me);
    expect(text).toContain('a file read and a task status');
    expect(status.status).toBe('completed');
    expect(settled).toBe(0);
    controller.abort();
    await Promise.all(queries);
    expect(settled).toBe(8);
  });

  it('interrupts the query of a REST caller that goes away: the task answers its next query', async () => {
    const { harness, taskId } = await servedTask();
    const query = (sql: string, signal?: AbortSignal) =>
      fetch(`${harness.server.url}/api/tasks/${taskId}/query`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ sql }),
        ...(signal === undefined ? {} : { signal }),
      });
    const caller = new AbortController();
    const gone = query(FOREVER, caller.signal).catch((error: unknown) => error);
    // Long enough for the query to have reached its process and begun.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    caller.abort();
    expect(await gone).toMatchObject({ name: 'AbortError' });
    // A task's queries run one at a time: this one answers only once the abandoned one was interrupted.
    const next = await query('SELECT 6 * 7 AS answer');
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ rows: 1, csv: 'answer\n42' });
  });

  it('interrupts the query of an MCP caller that cancels its request', async () => {
    const { grynya, taskId } = await servedTask();
    const caller = new AbortController();
    const gone = grynya
      .callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: FOREVER } }, undefined, { signal: caller.signal })
      .catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    caller.abort();
    await gone;
    const next = payload(await grynya.callTool({ name: 'query_task_artifact', arguments: { task_id: taskId, sql: 'SELECT 6 * 7 AS answer' } }));
    expect(next).toMatchObject({ rows: 1, csv: 'answer\n42' });
  });
});

describe('@klym/core without a query', () => {
  it('loads no DuckDB: the native addon is loaded only in a query process', async () => {
    const script = `
      const loaded = [];
      const dlopen = process.dlopen;
      process.dlopen = (module, filename, ...rest) => { loaded.push(filename); return dlopen(module, filename, ...rest); };
      const core = await import('@klym/core');
      if (typeof core.createTaskManager !== 'function') throw new Error('no createTaskManager');
      console.log(JSON.stringify(loaded));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--conditions=klym-source', '--input-type=module', '-e', script], {
      cwd: new URL('../packages/core/', import.meta.url),
    });
    const loaded = JSON.parse(stdout) as string[];
    expect(loaded.filter((file) => /duckdb/i.test(file))).toEqual([]);
  });
});
