// The Klym server the server benchmarks measure, in a process of its own (bench/klym-child.ts), and the
// benchmark's side of it: an SDK client over Streamable HTTP, and waiting for its tasks to end.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ChildServer } from './servers.ts';
import { summarize, type Summary } from './stats.ts';
import type { KlymServerOptions } from '../apps/server/src/server/index.ts';

export interface KlymChild {
  readonly pid: number;
  readonly mcpUrl: string;
  readonly url: string;
  /** A trivial HTTP endpoint on an otherwise idle thread of the child (absent from an older checkout's child). */
  readonly floorUrl: string | undefined;
  ask<T = Record<string, unknown>>(type: string): Promise<T>;
  stop(): Promise<void>;
}

/** Starts Klym's server in a process of its own; `root` is the checkout whose server it runs (this one by default). */
export async function startKlymChild(options: KlymServerOptions, root = path.resolve(import.meta.dirname, '..')): Promise<KlymChild> {
  const child = fork(path.join(root, 'bench/klym-child.ts'), [JSON.stringify(options)], {
    execArgv: [
      '--conditions=klym-source',
      '--expose-gc',
      ...(process.env.KLYM_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      ...(process.env.KLYM_BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.KLYM_BENCH_PROFILE_DIR ?? '/tmp/prof'}`] : []),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  // A child that fails to start (its error is on this process's stderr) must end the run, not hang it.
  const failed = once(child, 'exit').then(([code]) => Promise.reject(new Error(`Klym's benchmark server exited with ${String(code)} before it was ready`)));
  failed.catch(() => {});
  const [ready] = (await Promise.race([once(child, 'message'), failed])) as [{ mcpUrl: string; url: string; floorUrl?: string }];
  const ask = async <T>(type: string): Promise<T> => {
    const answer = once(child, 'message') as Promise<[T]>;
    child.send({ type });
    return (await answer)[0];
  };
  return {
    pid: child.pid ?? 0,
    mcpUrl: ready.mcpUrl,
    url: ready.url,
    floorUrl: ready.floorUrl,
    ask,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.send({ type: 'close' });
      await exited;
    },
  };
}

export async function client(url: string): Promise<Client> {
  const connected = new Client({ name: 'bench-grynya', version: '1.0.0' });
  await connected.connect(new StreamableHTTPClientTransport(new URL(url)));
  return connected;
}

/** Scenario 5's server: five upstreams that all point at one fake grynya, `concurrency` tasks at a time. */
export function scenarioFiveOptions(grynya: ChildServer, concurrency: number): KlymServerOptions {
  const upstreams = Object.fromEntries(
    Array.from({ length: 5 }, (_, index) => [`grynya${index + 1}`, { url: grynya.sseUrl, transport: 'sse' as const, pool: { min: 1, max: concurrency / 5 } }]),
  );
  return { port: 0, upstreams, tasks: { maxConcurrent: concurrency, ttlMs: 3_000, shutdownGraceMs: 0, runner: 'thread' } };
}

export async function waitUntilIdle(klym: KlymChild): Promise<void> {
  for (;;) {
    const { tasks } = await klym.ask<{ tasks: Record<string, number> }>('stats');
    if ((tasks.pending ?? 0) + (tasks.running ?? 0) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A sample of round trips (ms), each with when it began (ms since the epoch: `performance.timeOrigin + performance.now()`). */
export interface Timed {
  readonly times: number[];
  readonly began: number[];
}

/** The round trips of `sample` that began in [from, to) (ms since the epoch), summarized. */
export function within(sample: Timed, from: number, to: number): Summary {
  return summarize(sample.times.filter((_, index) => (sample.began[index] ?? 0) >= from && (sample.began[index] ?? 0) < to));
}

/**
 * Grynya's status polls in a process of their own (bench/status-poller.ts): tell it the newest task, then
 * stop it for its times. Given a floor URL it also times that endpoint between the polls (`floor`).
 */
export interface StatusPoller {
  readonly pid: number | undefined;
  poll(taskId: string): void;
  /** The polls' round trips, and the floor endpoint's (empty without a floor URL). */
  stop(): Promise<Timed & { readonly floor: Timed }>;
}

export async function startStatusPoller(mcpUrl: string, floorUrl?: string): Promise<StatusPoller> {
  const child = fork(path.join(import.meta.dirname, 'status-poller.ts'), [mcpUrl, ...(floorUrl === undefined ? [] : [floorUrl])], {
    execArgv: ['--conditions=klym-source'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await once(child, 'message');
  return {
    pid: child.pid,
    poll: (taskId) => void child.send({ taskId }),
    async stop() {
      const answer = once(child, 'message') as Promise<[Timed & { floor: Timed }]>;
      child.send({ stop: true });
      const [polls] = await answer;
      return polls;
    },
  };
}

/** Scenario 5's callers: 16 at a time start `tasks` self-checks as fast as they are answered, handing each task to the poller. */
export async function startAsFastAsAnswered(callers: Client, tasks: number, poller: StatusPoller): Promise<void> {
  let started = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (started < tasks) {
        started++;
        const answer = await callers.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
        poller.poll(String((answer.structuredContent as { task_id?: unknown } | undefined)?.task_id));
      }
    }),
  );
}
