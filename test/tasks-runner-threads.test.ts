// Runs spread over several runner threads (`createThreadRunner({ threads })`): a run that keeps its thread
// busy beside one that must answer, a thread that dies under its runs, and `pool.max` as the threads' total
// (no more threads than the smallest `pool.max`, and `klym serve` saying so). Real parts: the fake grynya over
// legacy SSE, a stdio server that records each start, the OpenAI provider against a local fake of its API, and
// a `setup` module (test/support/runner-thread-spin.ts) through which a run's prompt spins or ends its thread.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createSessionPool, createTaskManager, type RunAgentOptions, type SessionPool, type TaskManager, type TaskRecord } from '@klym/core';
import { createThreadRunner, type ThreadRunner, type ThreadRunnerOptions } from '@klym/core/engine';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { startKlymServer } from '../apps/server/src/server/index.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const KEY = 'sk-test-key-for-the-fake-0123456789';
const SPIN = path.resolve(import.meta.dirname, 'support/runner-thread-spin.ts');
const FIXTURE = path.resolve(import.meta.dirname, 'support/stdio-fixture-server.ts');

/** The stdio fixture as an upstream (`pool.max` 1 unless `pool` says otherwise), appending its pid to `spawns` at each start. */
const stdioFixture = (spawns: string, pool?: { readonly max: number }) => ({
  command: process.execPath,
  args: ['--conditions=klym-source', FIXTURE, `--spawn-log=${spawns}`],
  ...(pool === undefined ? {} : { pool }),
});

/** A file for the fixture's spawn log, in a fresh directory. */
const spawnLog = (): string => path.join(mkdtempSync(path.join(tmpdir(), 'klym-spawns-')), 'spawns');

/** The fake grynya, a main-thread pool over it, the fake OpenAI API answering with `reply`, and a runner over them. */
async function setUp(
  runner: Omit<ThreadRunnerOptions, 'upstreams'>,
  reply: (request: { readonly body: string }) => FakeReply = () => ({ kind: 'turn', text: 'done' }),
  pool: { readonly max: number } | undefined = undefined,
): Promise<{
  grynya: FakeGrynya;
  pool: SessionPool;
  llm: FakeLlmServer;
  runner: ThreadRunner;
  model: { model: string; providers: NonNullable<RunAgentOptions['providers']> };
}> {
  const grynya = await createFakeGrynya();
  cleanups.push(() => grynya.close());
  const upstreams = { grynya: { url: grynya.sseUrl, transport: 'sse' as const, ...(pool === undefined ? {} : { pool, timeouts: { acquireMs: 1_000 } }) } };
  const mainPool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
  cleanups.push(() => mainPool.close({ drainTimeoutMs: 100 }));
  const llm = await startFakeLlmServer(reply);
  cleanups.push(() => llm.close());
  const threads = createThreadRunner({ upstreams, drainTimeoutMs: 100, ...runner });
  cleanups.push(() => threads.close());
  return {
    grynya,
    pool: mainPool,
    llm,
    runner: threads,
    model: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } },
  };
}

function manager(tasks: TaskManager): TaskManager {
  cleanups.push(() => tasks.close({ graceMs: 0 }));
  return tasks;
}

async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  // A wait, not a time limit: a fresh runner thread loads Klym and connects its pool on a machine that may be busy.
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 30_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

describe('runs spread over runner threads', { timeout: 60_000 }, () => {
  it.each([
    { threads: 2, order: ['fast', 'heavy'] },
    { threads: 1, order: ['heavy', 'fast'] },
  ])(
    'on $threads runner thread(s), a run that answers at once beside one that keeps its thread busy for 2 s ends $order.0 first',
    async ({ threads, order }) => {
      const { pool, llm, runner, model } = await setUp({ threads, setup: SPIN });
      // Two runs at once first: with two threads both are running, so what follows measures runs, not a thread's start.
      await Promise.all([runner({ pool, prompt: 'warm up', ...model }), runner({ pool, prompt: 'warm up', ...model })]);
      const ends: string[] = [];
      const heavy = runner({ pool, prompt: 'spin 2000 ms', ...model }).then(() => ends.push('heavy'));
      // Its model answer arrives as soon as the fake has the request: from then on its thread spins.
      await expect.poll(() => llm.requests.some((request) => request.body.includes('spin 2000 ms'))).toBe(true);
      const fast = runner({ pool, prompt: 'answer now', ...model }).then(() => ends.push('fast'));

      await Promise.all([heavy, fast]);

      expect(ends).toEqual(order);
      expect(llm.requests.filter((request) => request.body.includes('answer now'))).toHaveLength(1);
    },
  );

  it('a runner thread that dies takes only its own run with it, which goes on from its checkpoint on a fresh thread; the other thread’s run completes', async () => {
    const release = Promise.withResolvers<FakeReply>();
    const marker = path.join(mkdtempSync(path.join(tmpdir(), 'klym-crash-')), 'crashed');
    const { pool, llm, runner, model } = await setUp({ threads: 2, setup: SPIN }, (request) =>
      request.body.includes('wait for me') ? { kind: 'later', reply: release.promise } : { kind: 'turn', text: 'done' },
    );
    const tasks = manager(createTaskManager({ pool, run: runner, defaults: model }));
    const waiting = await tasks.start({ prompt: 'wait for me' }, me);
    await expect.poll(() => llm.requests.length, { timeout: 30_000 }).toBe(1);

    // The first thread is busy with the waiting run: this one starts the second, whose death takes it down once.
    const crash = await tasks.start({ prompt: `crash once: ${marker}` }, me);
    const done = await ended(tasks, crash.id);
    expect(done).toMatchObject({ status: 'completed', result: { text: 'done' } });
    expect(existsSync(marker)).toBe(true);
    // Resumed once, as after a crash; the log says so.
    expect(done.resumes).toHaveLength(1);
    expect((await tasks.logs(crash.id, me)).entries.map((entry) => entry.type)).toContain('task-resume');
    expect((await tasks.get(waiting.id, me)).status).toBe('running');
    release.resolve({ kind: 'turn', text: 'waited and done' });
    expect(await ended(tasks, waiting.id)).toMatchObject({ status: 'completed', result: { text: 'waited and done' } });
  });

  it('a run that kills its thread every time ends after maxRunnerResumes, saying so; later runs get a fresh thread', async () => {
    const { pool, runner, model } = await setUp({ threads: 2, setup: SPIN }, () => ({ kind: 'turn', text: 'done' }));
    const tasks = manager(createTaskManager({ pool, run: runner, defaults: model }));
    const crash = await tasks.start({ prompt: 'crash: exit' }, me);
    expect(await ended(tasks, crash.id)).toMatchObject({
      status: 'error',
      resumes: [0, 0, 0],
      error: {
        code: 'INTERNAL',
        message:
          'The runner thread ended while the run was under way (it exited with code 3); the next run starts a fresh thread; the task was resumed 3 times already (at most 3), and is not resumed again',
      },
    });
    const next = await tasks.start({ prompt: 'after the crash' }, me);
    expect(await ended(tasks, next.id)).toMatchObject({ status: 'completed', result: { text: 'done' } });
  });

  it("takes an upstream's pool.max as the total over the threads: 3 over 2 threads is 2 + 1 sessions, and a fourth call waits", async () => {
    const { grynya, pool, runner } = await setUp({ threads: 2 }, undefined, { max: 3 });
    grynya.faults.hang = true;
    // The scripted model's Self-check calls query_graph, which hangs: each call holds a session of its thread's pool.
    // Four runs, two to each thread: the first thread's two calls take its 2 sessions, the second's take its 1 and wait.
    const runs = Array.from({ length: 4 }, () => runner({ pool, prompt: 'Self-check' }));

    // The call left waiting gives up after the upstream's `acquireMs` (1 s), its run reading the failure.
    // (Bounded: were each thread given all 3, every call would hang, and no run would end.)
    const first = await Promise.race([...runs, delay(20_000, { text: 'no run ended within 20 s' })]);

    expect(first.text).toMatch(/no session came free within 1000 ms/);
    expect(grynya.stats.calls.query_graph).toBe(3);
    // The main thread's pool holds one more, apart from the threads' total.
    expect(grynya.stats.sessionsOpen).toBe(4);
  });

  it('starts one thread, so one process, for a stdio upstream of pool.max 1 when 3 threads are asked for and 3 runs are under way at once', async () => {
    const spawns = spawnLog();
    const allUnderWay = Promise.withResolvers<void>();
    let firstRequests = 0;
    // Each run's first model request waits until all three runs have made theirs, then calls the fixture's `pid`.
    // Were each run on a thread of its own (3 threads, a pool each), each thread would start a process.
    const llm = await startFakeLlmServer((request) => {
      if (request.body.includes('function_call_output')) return { kind: 'turn', text: 'done' };
      if (++firstRequests === 3) allUnderWay.resolve();
      return { kind: 'later', reply: allUnderWay.promise.then((): FakeReply => ({ kind: 'turn', toolCalls: [{ name: 'fixture__pid', args: {} }] })) };
    });
    cleanups.push(() => llm.close());
    const pool = await createSessionPool({ upstreams: {} });
    cleanups.push(() => pool.close());
    const runner = createThreadRunner({ upstreams: { fixture: stdioFixture(spawns) }, threads: 3, drainTimeoutMs: 100 });
    cleanups.push(() => runner.close());
    const model = { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } } };

    const results = await Promise.all([1, 2, 3].map((n) => runner({ pool, prompt: `run ${n}`, ...model })));

    expect(results.map((result) => result.text)).toEqual(['done', 'done', 'done']);
    const pids = readFileSync(spawns, 'utf8').trim().split('\n');
    expect(pids).toHaveLength(1);
    // Every run's call reached that one process.
    const answers = llm.requests.filter((request) => request.body.includes('function_call_output'));
    expect(answers).toHaveLength(3);
    expect(answers.every((request) => request.body.includes(pids[0] as string))).toBe(true);
    expect({ threads: runner.threads, threadsCappedBy: runner.threadsCappedBy }).toEqual({
      threads: 1,
      threadsCappedBy: { upstream: 'fixture', max: 1, requested: 3 },
    });
  });

  it.each([
    {
      pool: undefined,
      upstream: 'of its default pool.max (1)',
      logged: [
        'klym: tasks run on 1 runner thread, not 3: upstream "memory" allows 1 session at a time (pool.max 1); raise its pool.max to run tasks on more threads',
      ],
    },
    { pool: { max: 3 }, upstream: 'of pool.max 3', logged: [] },
  ])(
    'klym serve with runnerThreads 3 over a stdio upstream $upstream logs $logged.length warning(s) of runner threads it cannot use',
    async ({ pool, logged }) => {
      const lines: { line: string; level: string | undefined }[] = [];
      const server = await startKlymServer({
        port: 0,
        upstreams: { memory: stdioFixture(spawnLog(), pool) },
        log: (line, level) => void lines.push({ line, level }),
        tasks: { runner: 'thread', runnerThreads: 3, shutdownGraceMs: 0 },
      });
      cleanups.push(() => server.close());

      expect(lines.filter(({ line }) => line.includes('runner thread'))).toEqual(logged.map((line) => ({ line, level: 'warning' })));
    },
  );

  it('refuses a thread count that is not a positive integer, naming it', () => {
    expect(() => createThreadRunner({ upstreams: {}, threads: 0 })).toThrow('Expected `threads` to be a positive integer, got 0');
    expect(() => createThreadRunner({ upstreams: {}, threads: 1.5 })).toThrow('Expected `threads` to be a positive integer, got 1.5');
  });
});
