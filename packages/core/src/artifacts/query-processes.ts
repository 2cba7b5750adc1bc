import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { FromQueryProcess, ProcessAnswer, QueryColumn, QueryLimits, ToQueryProcess } from './query-messages.ts';
import { deathError, loadError, queryFailure, stoppedError, type ProcessKill, type ProcessWalls, type Stop } from './query-errors.ts';
import type { LineSlice } from './query-tables.ts';
import { openQueryText, type QuerySource } from './query-text.ts';

export type { QuerySource };

/**
 * Memory a query process may use past its DuckDB's `memoryMiB`, as the OS counts it (resident set): Node
 * and DuckDB's code (about 115 MiB before any query), a chunk of rows being read, and one slice of a text
 * being loaded.
 */
export const PROCESS_MARGIN_MIB = 256;

/** How often a busy query process's memory is read, in milliseconds. */
const WATCH_MS = 20;

/** How long an interrupted query has to end before its process is killed, in milliseconds. */
const KILL_GRACE_MS = 1_000;

/** Characters of a process's last words (stderr) kept to explain why it died. */
const STDERR_CHARS = 2_000;

/** The query process's entry, loaded by path: `.ts` from the sources, `.js` from `dist`. */
const ENTRY = new URL(import.meta.url.endsWith('.ts') ? './query-process.ts' : './query-process.js', import.meta.url);

/** Options of {@link createQueryProcesses}. */
export interface QueryProcessesOptions {
  /** Query processes at most, started as queries need them. */
  readonly processes: number;
  /** Queries at once in one process. */
  readonly maxConcurrent: number;
  /** DuckDB's memory per task database; a process past it plus {@link PROCESS_MARGIN_MIB} is killed. */
  readonly memoryMiB: number;
  readonly threads: number;
}

/** One query for a process to run. */
export interface QueryJob {
  /** The task's database (one per `ArtifactQuery`). */
  readonly database: string;
  readonly source: QuerySource;
  readonly work: { readonly type: 'query'; readonly sql: string } | { readonly type: 'describe'; readonly table: string };
  readonly limits: Omit<QueryLimits, 'memoryMiB' | 'threads'>;
  /** The query's time at most, waiting for a process included. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/** What a job answers: a query's answer, or a table's columns (empty when the task has no such artifact). */
export type JobAnswer = { readonly type: 'answer'; readonly answer: ProcessAnswer } | { readonly type: 'described'; readonly columns: readonly QueryColumn[] };

/**
 * The processes DuckDB runs in, none in the serving process: a query that needs more memory than its limit, or
 * runs past its time and does not stop when interrupted, takes down its own process only. Shared by the
 * tasks' DuckDBs (`createArtifactQuery`'s `processes`); whoever creates them closes them.
 */
export interface QueryProcesses extends AsyncDisposable {
  /** The processes' ids, for a look at their memory. */
  pids(): number[];
  /** Kills every process; queries under way fail with `ABORTED`. Idempotent. */
  close(): Promise<void>;
}

/** What `createArtifactQuery` asks of its processes. */
export interface QueryProcessPool extends QueryProcesses {
  /**
   * Runs `job` in a process: the one that has the task's tables loaded when it has room, else any with room.
   * @throws {KlymError} `QUERY_FAILED` (DuckDB refused it, or a limit stopped it, named with its value), `ABORTED`
   * (its signal, or the processes closed), `INVALID_ARGUMENT` (no statement)
   */
  run(job: QueryJob): Promise<JobAnswer>;
  /** The task's database is no longer needed: its process drops its tables. */
  drop(database: string): void;
}

/** The pool behind processes `createQueryProcesses` made (every `QueryProcesses` is one). */
export const poolOf = (processes: QueryProcesses): QueryProcessPool => processes as QueryProcessPool;

interface Pending {
  readonly id: number;
  readonly job: QueryJob;
  readonly resolve: (answer: JobAnswer) => void;
  readonly reject: (error: unknown) => void;
  /** Whether it must run with no other query beside it: a retry after its process died with others in it. */
  alone: boolean;
  retried: boolean;
  stop?: Stop;
  process?: QueryProcess;
  /** Reads the artifact its process is loading, a slice of whole lines at a time. */
  loading?: { readonly table: string; readonly read: (from: number) => Promise<LineSlice> };
  timer?: NodeJS.Timeout;
  grace?: NodeJS.Timeout;
  onAbort?: () => void;
}

interface QueryProcess {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly running: Map<number, Pending>;
  readonly databases: Set<string>;
  exited: boolean;
  /** Why Klym killed it, when it did. */
  killed?: ProcessKill;
  stderr: string;
  watch?: NodeJS.Timeout;
}

/** The resident memory of process `pid` in MiB, as the OS counts it; `undefined` where /proc cannot tell. */
function residentMiB(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'latin1');
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}

/**
 * The processes DuckDB runs in, started as queries need them; see {@link QueryProcesses}.
 * @example
 * ```ts
 * await using processes = createQueryProcesses({ processes: 2, maxConcurrent: 1, memoryMiB: 512, threads: 2 });
 * const duck = createArtifactQuery({ source: backend, processes });
 * ```
 */
export function createQueryProcesses(options: QueryProcessesOptions): QueryProcesses {
  return openQueryProcessPool(options);
}

/** {@link createQueryProcesses}, with what `createArtifactQuery` asks of them. */
export function openQueryProcessPool(options: QueryProcessesOptions): QueryProcessPool {
  const { processes: maxProcesses, maxConcurrent, memoryMiB, threads } = options;
  const limitMiB = memoryMiB + PROCESS_MARGIN_MIB;
  const walls: ProcessWalls = { memoryMiB, marginMiB: PROCESS_MARGIN_MIB };
  const processes = new Set<QueryProcess>();
  const waiting: Pending[] = [];
  /** Where each task's tables are loaded. */
  const homes = new Map<string, QueryProcess>();
  let nextId = 0;
  let closed = false;

  const post = (target: QueryProcess, message: ToQueryProcess): void => {
    if (!target.exited && target.child.connected) target.child.send(message);
  };

  const settle = (pending: Pending): void => {
    clearTimeout(pending.timer);
    clearTimeout(pending.grace);
    if (pending.onAbort !== undefined) pending.job.signal?.removeEventListener('abort', pending.onAbort);
    const at = waiting.indexOf(pending);
    if (at !== -1) waiting.splice(at, 1);
    if (pending.process !== undefined) {
      pending.process.running.delete(pending.id);
      idleWatch(pending.process);
    }
    pending.loading = undefined;
  };
  const resolveWith = (pending: Pending, answer: JobAnswer): void => {
    settle(pending);
    pending.resolve(answer);
    pump();
  };
  const rejectWith = (pending: Pending, error: unknown): void => {
    settle(pending);
    pending.reject(error);
    pump();
  };

  const kill = (target: QueryProcess, why: NonNullable<QueryProcess['killed']>): void => {
    if (target.exited || target.killed !== undefined) return;
    target.killed = why;
    target.child.kill('SIGKILL');
  };

  /** Stops `pending`: out of the line if it waits; interrupted, then its process killed after a grace, if it runs. */
  const stop = (pending: Pending, reason: Stop): void => {
    if (pending.stop !== undefined) return;
    pending.stop = reason;
    const target = pending.process;
    if (target === undefined) return rejectWith(pending, stoppedError(pending));
    post(target, { type: 'interrupt', id: pending.id });
    pending.grace = setTimeout(() => kill(target, { reason: 'stop' }), KILL_GRACE_MS);
  };

  const watchMemory = (target: QueryProcess): void => {
    if (target.watch !== undefined || target.child.pid === undefined) return;
    const pid = target.child.pid;
    target.watch = setInterval(() => {
      const rss = residentMiB(pid);
      if (rss !== undefined && rss > limitMiB) kill(target, { reason: 'memory', rssMiB: rss });
    }, WATCH_MS);
  };
  const idleWatch = (target: QueryProcess): void => {
    if (target.running.size > 0) return;
    clearInterval(target.watch);
    target.watch = undefined;
    // An idle process keeps no one waiting: Klym may exit without closing it.
    target.child.channel?.unref();
  };

  const onExit = (target: QueryProcess, code: number | null, signal: NodeJS.Signals | null): void => {
    target.exited = true;
    clearInterval(target.watch);
    processes.delete(target);
    for (const [database, home] of homes) if (home === target) homes.delete(database);
    // Latest first: each goes back to the front of the line, so that they keep their order there.
    const caught = [...target.running.values()].toReversed();
    target.running.clear();
    const { killed } = target;
    for (const pending of caught) {
      pending.process = undefined;
      if (pending.stop !== undefined) {
        rejectWith(pending, stoppedError(pending));
        continue;
      }
      // Killed for another query's sake, or with others beside it: each is tried again once, alone, so that only the one to blame fails.
      const blameless = killed?.reason === 'stop' || caught.length > 1;
      if (blameless && !pending.retried) {
        pending.retried = true;
        pending.alone = killed?.reason !== 'stop';
        waiting.unshift(pending);
        continue;
      }
      rejectWith(pending, deathError(killed, code, signal, target.stderr, walls));
    }
    pump();
  };

  const spawn = (): QueryProcess => {
    const child = fork(ENTRY, [], {
      // The page and a slice are all its heap holds; DuckDB's memory is its own, watched as the process's.
      execArgv: ['--max-old-space-size=512', '--expose-gc'],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    const ready = Promise.withResolvers<void>();
    const target: QueryProcess = { child, ready: ready.promise, running: new Map(), databases: new Set(), exited: false, stderr: '' };
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => (target.stderr = (target.stderr + text).slice(-STDERR_CHARS)));
    child.on('message', (message: FromQueryProcess) => {
      if (message.type === 'ready') return ready.resolve();
      void onMessage(target, message);
    });
    child.on('error', () => undefined);
    child.once('exit', (code, signal) => {
      ready.reject(deathError(target.killed, code, signal, target.stderr, walls));
      onExit(target, code, signal);
    });
    ready.promise.catch(() => undefined);
    child.unref();
    (child.stderr as { unref?: () => void } | null)?.unref?.();
    processes.add(target);
    return target;
  };

  const onMessage = async (target: QueryProcess, message: FromQueryProcess): Promise<void> => {
    if (message.type === 'ready') return;
    const pending = target.running.get(message.id);
    if (pending === undefined) return;
    switch (message.type) {
      case 'need': {
        let text;
        try {
          text = await openQueryText(pending.job.source, message.table);
        } catch (error) {
          return loadFailed(target, pending, message.table, error);
        }
        if (target.running.get(message.id) !== pending) return;
        if (text === undefined) return post(target, { type: 'artifact', id: pending.id, table: message.table, found: false });
        pending.loading = { table: message.table, read: text.read };
        const base = { type: 'artifact', id: pending.id, table: message.table, found: true, chars: text.chars } as const;
        return post(target, {
          ...base,
          ...(text.records === undefined ? {} : { records: text.records }),
          ...(text.json === undefined ? {} : { json: text.json }),
        });
      }
      case 'next': {
        let slice: LineSlice;
        try {
          slice = (await pending.loading?.read(message.from)) ?? { text: '', end: message.from + 1 };
        } catch (error) {
          return loadFailed(target, pending, pending.loading?.table ?? 'an artifact', error);
        }
        if (target.running.get(message.id) !== pending) return;
        return post(target, { type: 'slice', id: pending.id, text: slice.text, end: slice.end });
      }
      case 'loaded':
        pending.loading = undefined;
        return;
      case 'answer':
        return resolveWith(pending, { type: 'answer', answer: message.answer });
      case 'described':
        return resolveWith(pending, { type: 'described', columns: message.columns });
      case 'failed':
        return rejectWith(pending, pending.stop === undefined ? await queryFailure(pending, message.error, walls) : stoppedError(pending));
    }
  };

  /** The task's store failed to give an artifact being loaded: the query fails saying so, its process stops waiting. */
  const loadFailed = (target: QueryProcess, pending: Pending, table: string, error: unknown): void => {
    if (target.running.get(pending.id) !== pending) return;
    post(target, { type: 'interrupt', id: pending.id });
    rejectWith(pending, loadError(table, error));
  };

  const hasRoom = (target: QueryProcess, pending: Pending): boolean =>
    !target.exited &&
    target.killed === undefined &&
    (pending.alone ? target.running.size === 0 : target.running.size < maxConcurrent && ![...target.running.values()].some((other) => other.alone));

  /** Gives waiting queries, first come first served, a process with room: their tables' home first. */
  const pump = (): void => {
    if (closed) return;
    for (let at = 0; at < waiting.length;) {
      const pending = waiting[at] as Pending;
      const home = homes.get(pending.job.database);
      let target = home !== undefined && hasRoom(home, pending) ? home : [...processes].find((candidate) => hasRoom(candidate, pending));
      if (target === undefined && processes.size < maxProcesses) target = spawn();
      if (target === undefined) {
        at++;
        continue;
      }
      waiting.splice(at, 1);
      start(target, pending, home);
    }
  };

  const start = (target: QueryProcess, pending: Pending, home: QueryProcess | undefined): void => {
    pending.process = target;
    target.running.set(pending.id, pending);
    target.child.channel?.ref();
    watchMemory(target);
    if (home !== undefined && home !== target) post(home, { type: 'drop', database: pending.job.database });
    homes.set(pending.job.database, target);
    target.databases.add(pending.job.database);
    const limits: QueryLimits = { ...pending.job.limits, memoryMiB, threads };
    const message: ToQueryProcess =
      pending.job.work.type === 'query'
        ? { type: 'query', id: pending.id, database: pending.job.database, sql: pending.job.work.sql, limits }
        : { type: 'describe', id: pending.id, database: pending.job.database, table: pending.job.work.table, limits };
    target.ready.then(
      () => {
        if (target.running.get(pending.id) === pending) post(target, message);
      },
      () => undefined,
    );
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const pending of waiting.splice(0)) stop(pending, 'close');
    const exits = [...processes].map(
      (target) =>
        new Promise<void>((resolve) => {
          if (target.exited) return resolve();
          target.child.once('exit', () => resolve());
          // Waited for: an unreferenced child would let the process end before its exit is heard.
          target.child.ref();
          for (const pending of target.running.values()) pending.stop ??= 'close';
          kill(target, { reason: 'stop' });
        }),
    );
    await Promise.all(exits);
  };

  return {
    run(job) {
      if (closed) return Promise.reject(stoppedError({ stop: 'close', job }));
      const { promise, resolve, reject } = Promise.withResolvers<JobAnswer>();
      const pending: Pending = { id: nextId++, job, resolve, reject, alone: false, retried: false };
      if (job.signal?.aborted === true) {
        pending.stop = 'signal';
        reject(stoppedError(pending));
        return promise;
      }
      pending.onAbort = () => stop(pending, 'signal');
      job.signal?.addEventListener('abort', pending.onAbort, { once: true });
      pending.timer = setTimeout(() => stop(pending, 'timeout'), job.timeoutMs);
      waiting.push(pending);
      pump();
      return promise;
    },
    drop(database) {
      const home = homes.get(database);
      homes.delete(database);
      if (home !== undefined) {
        home.databases.delete(database);
        post(home, { type: 'drop', database });
      }
    },
    pids: () => [...processes].flatMap((target) => (target.child.pid === undefined ? [] : [target.child.pid])),
    close,
    [Symbol.asyncDispose]: close,
  };
}
