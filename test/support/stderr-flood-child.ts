// Klym's task machinery over the stdio fixture, alone in its own process, so that a test can measure the
// memory of the process that reads a stdio upstream's stderr. At each IPC message `flood` a task (real
// agent loop, scripted model, SQLite task store as `klym serve` keeps it) calls the fixture to write
// 50 MiB to stderr: 25 MiB in 1 KiB lines, then 25 MiB as one line without a newline. Once the task has
// ended and every byte is read, the process answers with its RSS, the upstream's stderr counts and how
// many entries the task's log was given.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createSessionPool, createTaskManager, runAgent } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { createSqliteTaskStore } from '@klym/core/sqlite';

const MIB = 1024 * 1024;
const fixture = path.join(import.meta.dirname, 'stdio-fixture-server.ts');
const directory = mkdtempSync(path.join(tmpdir(), 'klym-flood-'));
const pool = await createSessionPool({ upstreams: { fixture: { command: process.execPath, args: [fixture] } } });
const store = await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') });
const flood = (newlines: boolean) => ({ toolName: 'fixture__flood_stderr', args: { megabytes: 25, newlines } });
const tasks = createTaskManager({
  pool,
  store,
  run: (options) =>
    runAgent({ ...options, model: createScriptedModel({ steps: [{ toolCalls: [flood(true)] }, { toolCalls: [flood(false)] }, { text: 'flooded' }] }) }),
});
const me = { principal: 'flood-test' };
const stderr = () => pool.status().fixture?.stderr ?? { bytes: 0, lines: 0, droppedBytes: 0 };
const report = (logEntries = 0) => void process.send?.({ rss: process.memoryUsage().rss, stderr: stderr(), logEntries });

process.on('message', async (message) => {
  if (message === 'close') {
    await tasks.close({ graceMs: 0 });
    await pool.close();
    await store.close();
    rmSync(directory, { recursive: true, force: true });
    process.disconnect();
    return;
  }
  // Each call ends its flood with "\nflood done\n".
  const expected = stderr().bytes + 2 * (25 * MIB + 12);
  const task = await tasks.start({ prompt: 'flood' }, me);
  while (!['completed', 'error', 'cancelled'].includes((await tasks.get(task.id, me)).status)) await delay(20);
  while (stderr().bytes < expected) await delay(10);
  report((await tasks.logs(task.id, me, { limit: 1 })).lastSeq);
});
await pool.warmedUp();
report();
