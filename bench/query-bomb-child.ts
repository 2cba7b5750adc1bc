// Scenario 10's query bomb (issue #39): the serving process's peak RSS growth while 250,000 rows of 10 KB (2.5 GB)
// are queried through a task manager's `queryArtifacts`, cold as a user pays it (the query processes not yet
// started); and a query process's own memory with nothing loaded (after `SELECT 1`), which every group figure
// carries. `query-bomb-child.ts`; prints one JSON line.
import { createSessionPool, createTaskManager, runAgent, type TaskManager, type TaskRecord } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { peakGrowthMiB, rssBeforeRun, watchGroup } from './heavy-run.ts';

const BOMB = "SELECT repeat('x', 10000) || range::VARCHAR FROM range(250000)";
const me = { principal: 'grynya' };

const pool = await createSessionPool({ upstreams: {} });
/** A task manager (its own query processes) with one task that has ended, to query. */
async function finishedTask(): Promise<{ readonly tasks: TaskManager; readonly id: string }> {
  const { promise: ended, resolve: end } = Promise.withResolvers<TaskRecord>();
  const tasks = createTaskManager({
    pool,
    run: (options) => runAgent({ ...options, model: createScriptedModel({ steps: () => ({ text: 'done' }) }) }),
    onEvent: (event) => {
      if (event.type === 'task-end') end(event.task);
    },
  });
  const { id } = await tasks.start({ prompt: 'nothing to do' }, me);
  await ended;
  return { tasks, id };
}
const bomb = await finishedTask();
const idle = await finishedTask();

const group = await watchGroup();
const rssBefore = rssBeforeRun();
group.start();
const started = performance.now();
const answer = await bomb.tasks.queryArtifacts(bomb.id, me, BOMB);
const queryMs = performance.now() - started;
const bombMiB = peakGrowthMiB(rssBefore);
const bombGroup = await group.stop(rssBefore);

await bomb.tasks.close({ graceMs: 0 });
// Another task manager's query process: its memory with DuckDB loaded and nothing in it.
const idleWatch = await watchGroup();
const idleBefore = rssBeforeRun();
idleWatch.start();
await idle.tasks.queryArtifacts(idle.id, me, 'SELECT 1');
const idleGroup = await idleWatch.stop(idleBefore);

console.log(
  JSON.stringify({
    rowCount: answer.rowCount,
    rows: answer.rows.length,
    queryMs,
    bombMiB,
    queryProcessPeakMiB: bombGroup.queryPeakMiB,
    queryProcessIdleMiB: idleGroup.queryPeakMiB,
  }),
);
await idle.tasks.close({ graceMs: 0 });
await pool.close({ drainTimeoutMs: 100 });
