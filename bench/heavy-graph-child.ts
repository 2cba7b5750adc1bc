// Scenario 10's graph task (issue #31), in a process of its own so that its peak RSS is the task's: one task of a
// task manager over the SQLite store asks the parent's fake grynya (legacy SSE) `MATCH (e:Event) RETURN e`, whose
// one-line answer is kept as records, and answers the question against the parent's fake model, which decides the
// path (grep, query or map). `heavy-graph-child.ts <dir> <grynya SSE URL> <openai base URL> <context window> <prompt>`;
// prints one JSON line (`RunFigures`).
import path from 'node:path';
import { createSessionPool, createTaskManager, type TaskRecord } from '@klym/core';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { peakGrowthMiB, rssBeforeRun, runFigures, watchGroup, type RunEvent } from './heavy-run.ts';

const [directory = '', sseUrl = '', baseURL = '', windowText = '', prompt = ''] = process.argv.slice(2);
const me = { principal: 'grynya' };
const store = await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') });
const pool = await createSessionPool({ upstreams: { grynya: { url: sseUrl, transport: 'sse', timeouts: { requestMs: 120_000 } } } });
await pool.warmedUp();
const { promise: ended, resolve: end } = Promise.withResolvers<TaskRecord>();
const tasks = createTaskManager({
  pool,
  store,
  defaults: {
    model: 'openai:gpt-4.1-mini',
    providers: { openai: { apiKey: 'sk-bench-key-for-the-fake-000000', baseURL } },
    contextWindows: { 'openai:gpt-4.1-mini': Number(windowText) },
  },
  onEvent: (event) => {
    if (event.type === 'task-end') end(event.task);
  },
});

const group = await watchGroup();
const rssBefore = rssBeforeRun();
group.start();
const started = performance.now();
const task = await tasks.start({ prompt }, me);
const done = await ended;
const runMs = performance.now() - started;
const growth = peakGrowthMiB(rssBefore);
const groupPeak = await group.stop(rssBefore);
const { entries } = await tasks.logs(task.id, me, { limit: 500 });
const events: RunEvent[] = entries.map((entry) => ({ type: entry.type, ...(entry.data as object) }));

console.log(
  JSON.stringify(
    runFigures(events, {
      runMs,
      peakGrowthMiB: growth,
      group: groupPeak,
      answer: done.result?.finalText ?? `${done.status}: ${done.error?.message ?? ''}`,
      finishReason: done.result?.finishReason ?? done.status,
    }),
  ),
);
await tasks.close({ graceMs: 0 });
await pool.close({ drainTimeoutMs: 100 });
await store.close();
