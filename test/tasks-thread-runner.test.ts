// Tasks run on the runner thread (`createThreadRunner`) against real parts: the fake grynya over legacy
// SSE, a stdio server, the scripted model and the real OpenAI provider against a local fake of its API.
import { readFileSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import path from 'node:path';
import {
  KlymError,
  type AgentCheckpoint,
  type CheckpointTaken,
  SELF_CHECK_OK,
  createMemoryTaskStore,
  createSessionPool,
  createTaskManager,
  isKlymError,
  runAgent,
  type SessionPool,
  type TaskManager,
  type TaskManagerOptions,
  type TaskEvent,
  type TaskRecord,
  type UpstreamCall,
  type UpstreamConfig,
  type UpstreamLogEntry,
} from '@klym/core';
import { createThreadRunner, type ThreadRunner } from '@klym/core/engine';
import { createScriptedModel } from '@klym/core/internal';
import { createInMemoryUpstream } from '@klym/core/testing';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startKlymServer } from '../apps/server/src/server/index.ts';
import { startKlym, temporaryDirectory } from './cli-harness.ts';
import { startFakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const KEY = 'sk-test-key-for-the-fake-0123456789';

/** The fake grynya, a pool over it for the main thread, and a runner thread with its own pool over the same upstream. */
async function setUp(
  more: Readonly<Record<string, UpstreamConfig>> = {},
): Promise<{ grynya: FakeGrynya; pool: SessionPool; runner: ThreadRunner; logs: UpstreamLogEntry[] }> {
  const grynya = await createFakeGrynya();
  cleanups.push(() => grynya.close());
  const upstreams = { grynya: { url: grynya.sseUrl, transport: 'sse' as const }, ...more };
  const pool = await createSessionPool({ upstreams });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  const logs: UpstreamLogEntry[] = [];
  const runner = createThreadRunner({ upstreams, onLog: (entry) => logs.push(entry), drainTimeoutMs: 100 });
  cleanups.push(() => runner.close());
  return { grynya, pool, runner, logs };
}

function manager(options: TaskManagerOptions): TaskManager {
  const tasks = createTaskManager(options);
  cleanups.push(() => tasks.close({ graceMs: 0 }));
  return tasks;
}

async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  // A wait, not a time limit: the runner thread starts its own pool (a stdio child among them) on a machine that may be busy.
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 30_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

const entriesOf = async (tasks: TaskManager, id: string) => (await tasks.logs(id, me, { limit: 500 })).entries;

async function fakeOpenAi(replies: readonly FakeReply[]): Promise<Awaited<ReturnType<typeof startFakeLlmServer>>> {
  const llm = await startFakeLlmServer(replies);
  cleanups.push(() => llm.close());
  return llm;
}

/** An onCheckpoint that keeps what it is handed. */
function checkpointListener() {
  const saved: { checkpoint: AgentCheckpoint; beforeCall: boolean | undefined }[] = [];
  return { saved, onCheckpoint: (checkpoint: AgentCheckpoint, taken?: CheckpointTaken) => void saved.push({ checkpoint, beforeCall: taken?.beforeCall }) };
}

/** The nice value of each thread of this process (Linux: field 19 of its stat). */
const niceOfThreads = (): number[] =>
  readdirSync('/proc/self/task').map((thread) => Number(readFileSync(`/proc/self/task/${thread}/stat`, 'utf8').split(') ')[1]?.split(' ')[16]));

describe('tasks on the runner thread', { timeout: 40_000 }, () => {
  it('runs a task to the same end, with the same log, as the inline runner', async () => {
    const { pool, runner } = await setUp();
    const inline = manager({ pool });
    const threaded = manager({ pool, run: runner });

    const [a, b] = await Promise.all([inline.start({ prompt: 'Self-check' }, me), threaded.start({ prompt: 'Self-check' }, me)]);
    const [inlineTask, threadTask] = await Promise.all([ended(inline, a.id), ended(threaded, b.id)]);

    expect(threadTask).toMatchObject({
      status: 'completed',
      result: { text: expect.stringMatching(new RegExp(`^${SELF_CHECK_OK}`)), toolCalls: 1 },
      usage: { steps: 2 },
    });
    expect(threadTask.result?.text).toBe(inlineTask.result?.text);
    const [inlineLog, threadLog] = await Promise.all([entriesOf(inline, a.id), entriesOf(threaded, b.id)]);
    expect(threadLog.map((entry) => entry.type)).toEqual(inlineLog.map((entry) => entry.type));
    expect(threadLog.map((entry) => entry.type)).toEqual(expect.arrayContaining(['run-start', 'tool-call', 'tool-result', 'step-end', 'run-end', 'task-end']));
  });

  it("hands the thread pool's tool calls to onCall, and each step's tokens to the manager's listener as task-step", async () => {
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const upstreams = { grynya: { url: grynya.sseUrl, transport: 'sse' as const } };
    const pool = await createSessionPool({ upstreams });
    cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
    const calls: UpstreamCall[] = [];
    const runner = createThreadRunner({ upstreams, onCall: (call) => calls.push(call), drainTimeoutMs: 100 });
    cleanups.push(() => runner.close());
    const events: TaskEvent[] = [];
    const tasks = manager({ pool, run: runner, onEvent: (event) => events.push(event) });

    const task = await tasks.start({ prompt: 'Self-check' }, me);

    expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', usage: { steps: 2 } });
    await expect
      .poll(() => calls.map(({ durationMs: _durationMs, ...call }) => call))
      .toEqual([{ upstream: 'grynya', toolName: 'query_graph', listed: true, outcome: 'ok' }]);
    const steps = events.flatMap((event) => (event.type === 'task-step' ? [event] : []));
    expect(steps.map((event) => event.step)).toEqual([1, 2]);
    expect(steps.every((event) => event.task.id === task.id && event.costUsd === 0 && event.usage.inputTokens > 0)).toBe(true);
    expect(events.some((event) => 'elsewhere' in event)).toBe(false);
  });

  it("keeps what an upstream logged while serving the task's calls, and hands the pool's log to onLog", async () => {
    const fixture = path.join(import.meta.dirname, 'support', 'stdio-fixture-server.ts');
    const { pool, runner, logs } = await setUp({ fixture: { command: process.execPath, args: ['--conditions=klym-source', fixture] } });
    const llm = await fakeOpenAi([
      { kind: 'turn', toolCalls: [{ name: 'fixture__log', args: { message: 'hello from the fixture' } }] },
      { kind: 'turn', text: 'logged it' },
    ]);
    const tasks = manager({
      pool,
      run: runner,
      defaults: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } },
    });

    const task = await tasks.start({ prompt: 'log something' }, me);

    expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: 'logged it' } });
    const upstreamLogs = (await entriesOf(tasks, task.id)).filter((entry) => entry.type === 'upstream-log').map((entry) => entry.data);
    expect(upstreamLogs).toContainEqual(expect.objectContaining({ upstream: 'fixture', source: 'stderr', message: 'stderr says hello from the fixture' }));
    expect(upstreamLogs).toContainEqual(expect.objectContaining({ upstream: 'fixture', source: 'notification', level: 'warning' }));
    expect(logs).toContainEqual(expect.objectContaining({ upstream: 'fixture', source: 'stderr', message: 'stderr says hello from the fixture' }));
  });

  it('keeps secrets out of every event: provider keys and configured secrets, in model text, tool arguments and tool results', async () => {
    const { grynya, pool, runner } = await setUp();
    const secret = 'grynya-private-token-0123456789';
    const llm = await fakeOpenAi([
      {
        kind: 'turn',
        text: `I will use ${secret} and ${KEY}.`,
        toolCalls: [{ name: 'grynya__query_graph', args: { query: `MATCH (n {token: '${secret}'}) RETURN n LIMIT 1` } }],
      },
      { kind: 'turn', text: `Done with ${secret}.` },
    ]);
    const tasks = manager({
      pool,
      run: runner,
      secrets: [secret],
      defaults: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } },
    });

    const task = await tasks.start({ prompt: 'look it up' }, me);

    expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: expect.stringContaining('[redacted]') } });
    expect(grynya.stats.calls.query_graph).toBe(1);
    const log = JSON.stringify(await entriesOf(tasks, task.id));
    expect(log).toContain('[redacted]');
    expect(log).not.toContain(secret);
    expect(log).not.toContain(KEY);
    expect(JSON.stringify(await tasks.get(task.id, me))).not.toContain(secret);
  });

  it("cancel reaches the run on the thread: its upstream call is cancelled, and it ends 'cancelled'", async () => {
    const { grynya, pool, runner } = await setUp();
    const tasks = manager({ pool, run: runner });
    grynya.faults.hang = true;

    const task = await tasks.start({ prompt: 'Self-check' }, me);
    await expect.poll(async () => (await tasks.get(task.id, me)).currentStep, { timeout: 10_000 }).toMatch(/calling grynya__query_graph/);
    await tasks.cancel(task.id, me);

    expect((await tasks.get(task.id, me)).status).toBe('cancelled');
    await expect.poll(() => grynya.stats.cancelled, { timeout: 5_000 }).toBeGreaterThanOrEqual(1);
    await expect
      .poll(async () => (await entriesOf(tasks, task.id)).find((entry) => entry.type === 'run-end')?.data, { timeout: 5_000 })
      .toMatchObject({ finishReason: 'cancelled' });
  });

  it("cancel reaches the model request on the thread: a hung request is aborted, and the run ends 'cancelled'", async () => {
    const { pool, runner } = await setUp();
    const llm = await fakeOpenAi([{ kind: 'hang' }]);
    const tasks = manager({
      pool,
      run: runner,
      defaults: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } },
    });

    const task = await tasks.start({ prompt: 'think hard' }, me);
    await expect.poll(() => llm.requests.length, { timeout: 10_000 }).toBe(1);
    await tasks.cancel(task.id, me);

    await expect
      .poll(async () => (await entriesOf(tasks, task.id)).find((entry) => entry.type === 'run-end')?.data, { timeout: 5_000 })
      .toMatchObject({ finishReason: 'cancelled' });
    expect(llm.requests).toHaveLength(1);
  });

  it('never sends a call whose record the store could not keep: it fails with STORE_UNAVAILABLE, which the model reads', async () => {
    const { grynya, pool, runner } = await setUp();
    const store = {
      ...createMemoryTaskStore(),
      saveCheckpoint: () => {
        throw new Error('the disk is full');
      },
    };
    const tasks = manager({ pool, run: runner, store });

    const task = await tasks.start({ prompt: 'Self-check' }, me);

    expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: expect.stringContaining('Self-check failed') } });
    const failure = (await entriesOf(tasks, task.id)).find((entry) => entry.type === 'tool-error')?.data;
    expect(failure).toMatchObject({
      toolName: 'grynya__query_graph',
      code: 'STORE_UNAVAILABLE',
      message: 'The call was not sent: its record could not be stored (the disk is full)',
    });
    expect(grynya.stats.toolCalls).toBe(0);
  });

  it("keeps onCheckpoint's promise across the thread: each checkpoint's conversation starts with the previous one's, the same objects", async () => {
    const { pool, runner } = await setUp();
    const memory = createMemoryTaskStore();
    const saved: AgentCheckpoint[] = [];
    const store = {
      ...memory,
      saveCheckpoint: (id: string, checkpoint: AgentCheckpoint) => void (saved.push(checkpoint), memory.saveCheckpoint(id, checkpoint)),
    };
    const tasks = manager({ pool, run: runner, store });

    const task = await tasks.start({ prompt: 'Self-check' }, me);

    expect((await ended(tasks, task.id)).status).toBe('completed');
    expect(saved.at(-1)?.messages.length).toBeGreaterThan(saved[0]?.messages.length ?? 0);
    for (const [index, checkpoint] of saved.entries()) {
      const before = saved[index - 1]?.messages ?? [];
      // What a store that appends by identity (the SQLite one) relies on: only new messages are written.
      expect(before.every((message, position) => checkpoint.messages[position] === message)).toBe(true);
    }
  });

  it('hands onCheckpoint what an inline run hands it: the same checkpoints, which of them a call waits for, and a result whose conversation is the last one', async () => {
    const { pool, runner } = await setUp();
    const [inline, threaded] = [checkpointListener(), checkpointListener()];

    const [inlineRun, threadRun] = await Promise.all([
      runAgent({ pool, prompt: 'Self-check', onCheckpoint: inline.onCheckpoint }),
      runner({ pool, prompt: 'Self-check', onCheckpoint: threaded.onCheckpoint }),
    ]);

    // Before the call, after it, after each of the two steps.
    expect(threaded.saved.map((saved) => saved.beforeCall)).toEqual([true, false, false, false]);
    expect(inline.saved.map((saved) => saved.beforeCall)).toEqual([true, false, false, false]);
    const timeless = ({ checkpoint: { elapsedMs: _elapsedMs, ...rest } }: (typeof threaded.saved)[number]) => rest;
    expect(threaded.saved.map(timeless)).toEqual(inline.saved.map(timeless));
    expect(threadRun.messages).toEqual(inlineRun.messages);
    expect(inlineRun.messages).toBe(inline.saved.at(-1)?.checkpoint.messages);
    expect(threadRun.messages).toBe(threaded.saved.at(-1)?.checkpoint.messages);
  });

  it('stores checkpoints one after another when the store answers later: in the order they were taken, the run ending after the last', async () => {
    const { pool, runner } = await setUp();
    const inline: AgentCheckpoint[] = [];
    await runAgent({ pool, prompt: 'Self-check', onCheckpoint: (checkpoint) => void inline.push(checkpoint) });
    const stored: AgentCheckpoint[] = [];
    let storing = 0;
    let mostAtOnce = 0;
    // Each store answers a few turns later; a second one begun before the first ended would show as two at once.
    const onCheckpoint = async (checkpoint: AgentCheckpoint): Promise<void> => {
      mostAtOnce = Math.max(mostAtOnce, ++storing);
      await new Promise((resolve) => setTimeout(resolve, 5));
      stored.push(checkpoint);
      storing--;
    };

    const result = await runner({ pool, prompt: 'Self-check', onCheckpoint });

    expect(mostAtOnce).toBe(1);
    expect(stored.map((checkpoint) => [checkpoint.steps, checkpoint.current?.calls.length])).toEqual(
      inline.map((checkpoint) => [checkpoint.steps, checkpoint.current?.calls.length]),
    );
    expect(result.messages).toBe(stored.at(-1)?.messages);
  });

  it('goes on past a checkpoint nobody waits for that could not be stored: the call is sent, and the task completes', async () => {
    const { grynya, pool, runner } = await setUp();
    const memory = createMemoryTaskStore();
    let failures = 0;
    const store = {
      ...memory,
      saveCheckpoint: (id: string, checkpoint: AgentCheckpoint) => {
        // Only the record before the call is kept; the ones after the call and after each step fail.
        const beforeCall = checkpoint.current?.calls.some((call) => call.output === undefined) ?? false;
        if (!beforeCall) {
          failures++;
          throw new Error('the disk is full');
        }
        memory.saveCheckpoint(id, checkpoint);
      },
    };
    const tasks = manager({ pool, run: runner, store });

    const task = await tasks.start({ prompt: 'Self-check' }, me);

    expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: expect.stringMatching(new RegExp(`^${SELF_CHECK_OK}`)) } });
    expect(grynya.stats.calls.query_graph).toBe(1);
    expect(failures).toBe(3);
  });

  it('close() ends the runs under way and the thread: their calls are cut, their sessions closed, later runs refused', async () => {
    const { grynya, pool, runner } = await setUp();
    grynya.faults.hang = true;
    const run = runner({ pool, prompt: 'Self-check' });
    await expect.poll(() => grynya.stats.calls.query_graph, { timeout: 10_000 }).toBe(1);

    await runner.close();

    expect((await run).finishReason).toBe('cancelled');
    expect(grynya.stats.cancelled).toBeGreaterThanOrEqual(1);
    // The main thread's pool keeps its one session; the thread's are gone.
    await expect.poll(() => grynya.stats.sessionsOpen, { timeout: 5_000 }).toBe(1);
    const refused = await runner({ pool, prompt: 'Self-check' }).catch((error: unknown) => error);
    expect(isKlymError(refused, 'SHUTTING_DOWN')).toBe(true);
  });

  // A thread's nice value is its own on Linux only; elsewhere the runner keeps the process's priority.
  it.skipIf(process.platform !== 'linux')('runs below the front: when cores are short, the thread that answers status polls goes first', async () => {
    const { grynya, pool } = await setUp();
    const base = getPriority();
    expect(niceOfThreads()).not.toContain(base + 7);
    const runner = createThreadRunner({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } }, niceness: 7 });
    cleanups.push(() => runner.close());
    const tasks = manager({ pool, run: runner });
    expect(await ended(tasks, (await tasks.start({ prompt: 'Self-check' }, me)).id)).toMatchObject({ status: 'completed' });
    expect(niceOfThreads()).toContain(base + 7);
    expect(() => createThreadRunner({ upstreams: {}, niceness: 20 })).toThrow(
      new KlymError('CONFIG_INVALID', 'Expected `niceness` to be an integer from 0 to 19, got 20'),
    );
  });

  it.skipIf(process.platform !== 'linux')("klym serve's `tasks.runnerNiceness` is its runner threads' nice value", async () => {
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const base = getPriority();
    expect(niceOfThreads()).not.toContain(base + 3);
    const server = await startKlymServer({
      port: 0,
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
      log: () => {},
      tasks: { runner: 'thread', runnerNiceness: 3, shutdownGraceMs: 0 },
    });
    cleanups.push(() => server.close());
    const { service } = server.klym;
    const { task_id } = await service.start({ prompt: 'Self-check' }, me.principal);
    await expect.poll(async () => (await service.status({ task_id }, me.principal)).status, { timeout: 30_000 }).toBe('completed');
    expect(niceOfThreads()).toContain(base + 3);
  });

  it('refuses what cannot cross a thread, naming it: an upstream given as connect(), a model object', async () => {
    expect(() => createThreadRunner({ upstreams: { memory: createInMemoryUpstream(() => new McpServer({ name: 'echo', version: '1.0.0' })) } })).toThrow(
      new KlymError(
        'CONFIG_INVALID',
        'Upstream "memory": an upstream given as a `connect()` function cannot run on the runner thread; give it a `url` or a `command`, or run tasks inline',
        { upstream: 'memory' },
      ),
    );
    const { pool, runner } = await setUp();
    const refused = await runner({ pool, prompt: 'hi', model: createScriptedModel() }).catch((error: unknown) => error);
    expect(isKlymError(refused, 'CONFIG_INVALID')).toBe(true);
    expect((refused as Error).message).toMatch(/^Expected `model` to be a model name on the runner thread, got a model object \(scripted:self-check\)/);
  });
});

describe('klym serve when its runner thread dies', () => {
  const FAULT = path.resolve(import.meta.dirname, 'support/runner-thread-fault.ts');

  it('resumes the runs of a thread that exited or threw, then ends one that always does as error, serves on, and runs the next task on a fresh thread', async () => {
    using cwd = temporaryDirectory();
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const klym = startKlym(['serve', '--port', '0', '--upstream', `grynya=${grynya.sseUrl}`, '--set', 'upstreams.grynya.transport=sse'], {
      cwd: cwd.path,
      nodeArgs: ['--import', FAULT],
    });
    cleanups.push(async () => {
      if (klym.child.exitCode === null && klym.child.signalCode === null) klym.child.kill('SIGKILL');
      await klym.exited();
    });
    const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
    const run = async (prompt: string): Promise<Record<string, unknown>> => {
      const started = (await (
        await fetch(`${url}/api/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }) })
      ).json()) as { task_id: string };
      const status = async () => (await (await fetch(`${url}/api/tasks/${started.task_id}`)).json()) as Record<string, unknown>;
      await expect.poll(async () => (await status()).status, { timeout: 15_000 }).toMatch(/completed|error|cancelled/);
      return status();
    };

    expect(await run('crash: exit')).toMatchObject({
      status: 'error',
      // A thread's death is not the run's doing: it goes on from its checkpoint, until it has resumed maxRunnerResumes times.
      error: {
        code: 'INTERNAL',
        message:
          'The runner thread ended while the run was under way (it exited with code 3); the next run starts a fresh thread; the task was resumed 3 times already (at most 3), and is not resumed again',
      },
    });
    expect(await run('Self-check')).toMatchObject({ status: 'completed', result: expect.stringMatching(new RegExp(`^${SELF_CHECK_OK}`)) });
    expect(await run('crash: throw')).toMatchObject({
      status: 'error',
      error: {
        code: 'INTERNAL',
        message:
          'The runner thread ended while the run was under way (it failed: Error: the fixture broke the runner thread); the next run starts a fresh thread; the task was resumed 3 times already (at most 3), and is not resumed again',
      },
    });
    expect(await run('Self-check')).toMatchObject({ status: 'completed' });
    // A rejection nobody handled on the thread is the process's, as it would be inline: logged, and the run goes on.
    expect(await run('crash: reject')).toMatchObject({ status: 'completed' });
    await klym.waitFor(
      /"level":"error",.*"msg":"klym: unhandled rejection \(logged; serving goes on\): Error: the fixture left a rejection on the runner thread/,
      'stderr',
    );
    expect((await fetch(`${url}/healthz`)).status).toBe(200);

    klym.child.kill('SIGTERM');
    expect((await klym.exited()).code).toBe(0);
  }, 60_000);
});
