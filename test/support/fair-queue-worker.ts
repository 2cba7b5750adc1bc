// A worker process of the fair-queue tests: `node --conditions=klym-source fair-queue-worker.ts <url> <queue name>`.
// It runs one task at a time with A capped at 1 run, never ends a run by itself, and prints `started <id>` as
// each begins, so that a test can SIGKILL it mid-run.
import { createRunBook, openQueue } from './fair-queue.ts';

const [url, name] = process.argv.slice(2);
if (url === undefined || name === undefined) throw new Error('usage: fair-queue-worker.ts <redis url> <queue name>');
await openQueue(url, name, createRunBook(), {
  name: 'child',
  concurrency: 1,
  limits: { A: 1 },
  queue: { lockDurationMs: 1_000, stalledIntervalMs: 500 },
  onStart: (id) => process.stdout.write(`started ${id}\n`),
});
process.stdout.write('ready\n');
