// The runner thread's entry (started by `createThreadRunner`, never imported): one session pool for the
// thread's life, and `runAgent` for each run the main thread asks for. Events and checkpoints go back in
// the order they happen; a before-call checkpoint holds its call until the main thread says it is stored.
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { runAgent } from '../../agent/run-agent.ts';
import { KlymError } from '../../errors.ts';
import { createSessionPool } from '../../pool/session-pool.ts';
import type { SessionScope } from '../../pool/session-scope.ts';
import type { QueryAnswer } from '../../artifacts/artifact-query.ts';
import { pageOf, type QueryPage } from '../../artifacts/artifact-types.ts';
import type { ArtifactBackend } from '../../artifacts/artifact-types.ts';
import {
  conversationDelta,
  createSender,
  fromPortableError,
  toPortableError,
  type ArtifactCall,
  type FromRunnerThread,
  type PortableRunOptions,
  type RunnerThreadData,
  type ToRunnerThread,
} from './runner-messages.ts';

interface ThreadRun {
  readonly controller: AbortController;
  /** Aborted with the hit when a budget kept outside the run is spent (`budget` message). */
  readonly budget: AbortController;
  /** Checkpoints posted and not yet stored, by their `seq`. */
  readonly stores: Map<number, { resolve(): void; reject(error: Error): void }>;
  /** Gates posted and not yet opened, by their `call` (`beforeStep`). */
  readonly gates: Map<number, () => void>;
  /** Artifact calls posted and not yet answered, by their `call`. */
  readonly artifactCalls: Map<number, { resolve(value: unknown): void; reject(error: Error): void }>;
  readonly done: Promise<void>;
}

function serve(port: MessagePort, data: RunnerThreadData): void {
  const post = createSender<FromRunnerThread>(port);
  if (data.aiSdkLogWarnings === false) (globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
  // Nobody on this thread can handle it: the main thread reports it as its own (`klym serve` logs it and goes on).
  process.on('unhandledRejection', (reason) => {
    const error = reason instanceof Error ? reason : new Error(String(reason));
    post({ type: 'rejection', error: { name: error.name, message: error.message, ...(error.stack === undefined ? {} : { stack: error.stack }) } });
  });
  // Listening starts now, not once the pool is open: a message that came before would be lost to a listener added later.
  const opening = createSessionPool({
    upstreams: data.upstreams,
    ...(data.clientInfo === undefined ? {} : { clientInfo: data.clientInfo }),
    onLog: (entry) => post({ type: 'log', entry }),
    // Batched with the run's events: a step's calls cost the main thread nothing more than its events do.
    ...(data.observeCalls ? { onCall: (call) => post({ type: 'call', call }) } : {}),
  });
  // The main thread checked the upstreams; should opening still fail, each run reports it.
  opening.catch(() => {});
  const runs = new Map<number, ThreadRun>();
  // What is per thread (an OpenTelemetry SDK): loaded before any run; a module that fails to load fails each run.
  const setup: Promise<{ close?: unknown } | undefined> = data.setup === undefined ? Promise.resolve(undefined) : import(data.setup);
  setup.catch(() => {});

  const start = (id: number, options: PortableRunOptions): ThreadRun => {
    const controller = new AbortController();
    const budget = new AbortController();
    const stores: ThreadRun['stores'] = new Map();
    const artifactCalls: ThreadRun['artifactCalls'] = new Map();
    const gates: ThreadRun['gates'] = new Map();
    let seq = 0;
    let calls = 0;
    const { scopeId, artifacts: keepsArtifacts, queries: keepsQueries = false, gated = false, ...runOptions } = options;
    // The main thread counts each step in its principal's day before the next: the run waits for its word.
    const beforeStep = (): Promise<void> =>
      new Promise<void>((resolve) => {
        gates.set(++calls, resolve);
        post({ type: 'gate', id, call: calls }, true);
      });
    // The task's artifacts are in its store, on the main thread: each call crosses and waits for its answer.
    const ask = <T>(call: ArtifactCall): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        artifactCalls.set(++calls, { resolve: resolve as (value: unknown) => void, reject });
        post({ type: 'artifact-call', id, call: calls, ...call }, true);
      });
    const artifacts: ArtifactBackend | undefined = keepsArtifacts
      ? {
          save: (artifact) => ask({ op: 'save', artifact }),
          load: (artifactId) => ask({ op: 'load', artifactId }),
          list: () => ask({ op: 'list' }),
          ...(keepsQueries ? { query: (sql: string, page: QueryPage = {}) => ask<QueryAnswer>({ op: 'query', sql, page: pageOf(page) }) } : {}),
        }
      : undefined;
    // The conversation the main thread holds for this run: each checkpoint sends only what it lacks.
    let shared = runOptions.resume?.messages ?? [];
    const execute = async (): Promise<void> => {
      let scope: SessionScope | undefined;
      try {
        await setup;
        const pool = await opening;
        scope = pool.openScope(scopeId);
        const result = await runAgent({
          ...runOptions,
          ...(artifacts === undefined ? {} : { artifacts }),
          pool,
          scope,
          signal: controller.signal,
          budgetSignal: budget.signal,
          ...(gated ? { beforeStep } : {}),
          onEvent: (event) => post({ type: 'event', id, event }),
          onCheckpoint: ({ messages, ...checkpoint }, taken) => {
            const delta = conversationDelta(shared, messages);
            shared = messages;
            // Nothing waits for a checkpoint taken after a step or a call: it crosses with the turn's batch, unanswered.
            if (taken?.beforeCall === false) return void post({ type: 'checkpoint', id, checkpoint, ...delta });
            const stored = new Promise<void>((resolve, reject) => stores.set(++seq, { resolve, reject }));
            post({ type: 'checkpoint', id, seq, checkpoint, ...delta }, true);
            return stored;
          },
        });
        const { messages, ...rest } = result;
        post({ type: 'end', id, result: rest, ...conversationDelta(shared, messages) }, true);
      } catch (error) {
        post({ type: 'fail', id, error: toPortableError(error) }, true);
      } finally {
        // The scope's own sessions close with the run, however it ended.
        await scope?.close();
        runs.delete(id);
      }
    };
    return { controller, budget, stores, gates, artifactCalls, done: execute() };
  };

  let closing = false;
  const receive = (message: ToRunnerThread): void => {
    switch (message.type) {
      case 'run':
        if (closing) post({ type: 'fail', id: message.id, error: { code: 'SHUTTING_DOWN', message: 'The runner thread is closing; the run was not started' } });
        else runs.set(message.id, start(message.id, message.options));
        break;
      case 'abort':
        runs.get(message.id)?.controller.abort(new KlymError('ABORTED', 'The run was cancelled'));
        break;
      case 'budget':
        runs.get(message.id)?.budget.abort(message.hit);
        break;
      case 'gate-open': {
        const gates = runs.get(message.id)?.gates;
        gates?.get(message.call)?.();
        gates?.delete(message.call);
        break;
      }
      case 'stored': {
        const stores = runs.get(message.id)?.stores;
        const waiting = stores?.get(message.seq);
        stores?.delete(message.seq);
        if (message.error === undefined) waiting?.resolve();
        else waiting?.reject(new Error(message.error));
        break;
      }
      case 'artifact-answer': {
        const artifactCalls = runs.get(message.id)?.artifactCalls;
        const waiting = artifactCalls?.get(message.call);
        artifactCalls?.delete(message.call);
        if (message.error === undefined) waiting?.resolve(message.value);
        else waiting?.reject(fromPortableError(message.error));
        break;
      }
      case 'close':
        if (closing) break;
        closing = true;
        void (async () => {
          const left = [...runs.values()];
          for (const run of left) run.controller.abort(new KlymError('ABORTED', 'The runner thread is closing'));
          await Promise.allSettled(left.map((run) => run.done));
          await opening.then((pool) => pool.close({ drainTimeoutMs: message.drainTimeoutMs })).catch(() => {});
          await setup.then((module) => (typeof module?.close === 'function' ? module.close() : undefined)).catch(() => {});
          post({ type: 'closed' });
        })();
        break;
      default:
        break;
    }
  };
  port.on('message', (batch: readonly ToRunnerThread[]) => {
    for (const message of batch) receive(message);
  });
}

/**
 * Lowers this thread's scheduling priority by `steps` (Linux: a thread's nice value is its own), so
 * that when the cores are short the main thread, which answers status polls, runs first. Elsewhere, or
 * where the OS refuses, the thread keeps the process's priority.
 */
function lowerPriority(steps: number): void {
  if (steps <= 0) return;
  try {
    const thread = Number(readlinkSync('/proc/thread-self').split('/').at(-1));
    setPriority(thread, Math.min(19, getPriority(thread) + steps));
  } catch {
    // Not Linux, or not allowed: the same priority as the front.
  }
}

if (parentPort !== null) {
  const data = workerData as RunnerThreadData;
  lowerPriority(data.niceness);
  serve(parentPort, data);
}
