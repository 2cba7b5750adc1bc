// Issue #27, big results become artifacts: a task reads a log far bigger than what its model should be
// sent, over a real stdio upstream, with the real OpenAI provider against a local fake of its API, on the
// SQLite store, inline and on the runner thread. The model is never sent the log; it finds the needle with
// klym__grep_artifact and reads around it with klym__read_artifact, and the artifact stays in the task's store.
import path from 'node:path';
import { createSessionPool, createTaskManager, createThreadRunner, type AgentRunner, type TaskManager, type TaskRecord, type TaskStore } from '@klym/core';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { temporaryDirectory } from './cli-harness.ts';
import { bigLog } from './support/big-log-server.ts';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from './support/fake-llm-server.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const KEY = 'sk-test-key-for-the-fake-0123456789';
const LINES = 40_000;
const NEEDLE_AT = 31_337;
const LOG = bigLog(LINES, NEEDLE_AT);
const upstreams = { big: { command: process.execPath, args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'big-log-server.ts')] } };

/**
 * The fake model, playing an agent that pages: it reads the log, then greps the artifact it was given for
 * the needle, reads the lines around the match, and answers with the line it found. It decides from what
 * the request it is sent holds, as a model would.
 */
function pagingAgent(request: FakeRequest): FakeReply {
  const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
  if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'big__read_log', args: { lines: LINES, needle_at: NEEDLE_AT } }] };
  const match = /(\d+): [^"\\]*FATAL the needle/.exec(request.body);
  if (match === null) return { kind: 'turn', toolCalls: [{ name: 'klym__grep_artifact', args: { artifact, pattern: 'FATAL.*needle' } }] };
  if (!request.body.includes('(line: text; 0-based):\\n') || !/lines \d+-\d+ of/.test(request.body)) {
    return { kind: 'turn', toolCalls: [{ name: 'klym__read_artifact', args: { artifact, offset: Number(match[1]) - 1, limit: 3 } }] };
  }
  return { kind: 'turn', text: `The needle is on line ${match[1]}: disk /dev/sdq failed.` };
}

async function setUp(runner: 'inline' | 'thread'): Promise<{ tasks: TaskManager; store: TaskStore; requests: FakeRequest[] }> {
  const directory = temporaryDirectory();
  const store = await createSqliteTaskStore({ path: path.join(directory.path, 'tasks.db') });
  const pool = await createSessionPool({ upstreams });
  const llm = await startFakeLlmServer(pagingAgent);
  const run: AgentRunner | undefined = runner === 'thread' ? createThreadRunner({ upstreams, drainTimeoutMs: 100 }) : undefined;
  const tasks = createTaskManager({
    pool,
    store,
    ...(run === undefined ? {} : { run }),
    defaults: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } },
  });
  cleanups.push(
    async () => directory[Symbol.dispose](),
    () => store.close(),
    () => pool.close({ drainTimeoutMs: 100 }),
    () => llm.close(),
    async () => (run as { close?: () => Promise<void> } | undefined)?.close?.(),
    () => tasks.close({ graceMs: 0 }),
  );
  return { tasks, store, requests: llm.requests };
}

async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 30_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

describe('big results become artifacts of their task', () => {
  for (const runner of ['inline', 'thread'] as const) {
    it(`finds a needle in a ${(LOG.length / 1e6).toFixed(1)} MB log it is never sent, by grep and read over the artifact (${runner})`, async () => {
      const { tasks, store, requests } = await setUp(runner);
      const task = await tasks.start({ prompt: 'On which line of the log did the disk fail?' }, me);

      expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: `The needle is on line ${NEEDLE_AT}: disk /dev/sdq failed.` } });
      // read_log, grep, read, answer: four requests, none of which carried the log.
      expect(requests).toHaveLength(4);
      const largest = Math.max(...requests.map((request) => request.body.length));
      expect(largest).toBeLessThan(LOG.length / 100);
      expect(requests.some((request) => request.body.includes(LOG.split('\n')[20_000] as string))).toBe(false);

      // The log is kept whole, once (its structuredContent copy was not kept again), in the task's store.
      const artifacts = await store.listArtifacts(task.id);
      expect(artifacts).toEqual([expect.objectContaining({ tool: 'big__read_log', bytes: Buffer.byteLength(LOG), lines: LINES })]);
      expect((await store.loadArtifact(task.id, artifacts[0]?.id as string))?.text).toBe(LOG);
      const kept = (await tasks.logs(task.id, me, { limit: 500 })).entries.filter((entry) => entry.type === 'artifact-kept');
      expect(kept).toHaveLength(1);
    });
  }
});
