import { Worker } from 'node:worker_threads';
import type { ModelMessage } from 'ai';
import type { AgentCheckpoint, AgentRunResult, CheckpointTaken, RunAgentOptions } from '../../agent/types.ts';
import { outsideBudget, type BudgetHit } from '../../agent/budget.ts';
import { KlymError } from '../../errors.ts';
import type { UpstreamConfig } from '../../pool/upstream-config.ts';
import type { UpstreamLogEntry } from '../../pool/upstream-session.ts';
import type { UpstreamCall } from '../../pool/upstream-status.ts';
import { createRedactor, secretsOf } from '../../redact.ts';
import {
  applyConversationDelta,
  createSender,
  fromPortableError,
  toPortableError,
  type ArtifactCall,
  type FromRunnerThread,
  type PortableError,
  type PortableRunOptions,
  type RunnerThreadData,
  type ToRunnerThread,
} from './runner-messages.ts';
import type { AgentRunner } from '../../agent/types.ts';
import { TASK_DEFAULTS } from '../../defaults.ts';
import type { ArtifactBackend } from '../../artifacts/artifact-types.ts';
import { portableRunOptions, portableUpstreams } from './portable-options.ts';

/** Options of {@link createThreadRunner}. */
export interface ThreadRunnerOptions {
  /**
   * The upstreams the thread's own session pool is opened over, as `createSessionPool` takes them: HTTP
   * and stdio upstreams (an upstream given as a `connect()` function cannot cross a thread).
   */
  readonly upstreams: Readonly<Record<string, UpstreamConfig>>;
  /** How Klym introduces itself in `initialize`. @default { name: 'klym', version: '0.1.0' } */
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** Receives what the thread's upstreams log, as `createSessionPool`'s `onLog` does. */
  readonly onLog?: (entry: UpstreamLogEntry) => void;
  /**
   * Receives every tool call of the thread's pool once it has ended, as `createSessionPool`'s `onCall`
   * does: they cross with the runs' events, a turn's worth at a time.
   */
  readonly onCall?: (call: UpstreamCall) => void;
  /** On `close()`, how long runs' calls may take to end before the thread's pool aborts them. @default 5_000 */
  readonly drainTimeoutMs?: number;
  /**
   * How many steps below the process's scheduling priority the thread runs (its nice value, 0-19; Linux,
   * where a thread has its own): when the cores are short, the main thread — the front that answers
   * status polls — runs first, and the runs take what it leaves. 0 keeps the process's priority. @default 10
   */
  readonly niceness?: number;
  /**
   * A module the thread imports before its first run, for what is per thread: `klym serve` registers an
   * OpenTelemetry SDK there when tracing is on, since the thread has globals of its own (a run's `tracing`
   * crosses without its `tracer`, and the thread's registered provider makes the spans). If the module
   * exports `close()`, the thread awaits it when it closes (to flush what it buffered). A module that
   * fails to load fails each run with its error. @default none
   */
  readonly setup?: string | URL;
}

/** A runner of tasks' agents on a worker thread of its own: an {@link AgentRunner} that must be closed. */
export type ThreadRunner = AgentRunner &
  AsyncDisposable & {
    /** Always true: the events come from `runAgent` on the thread, redacted there. */
    readonly redactsEvents: true;
    /** Ends the runs still under way (their scopes close), closes the thread's pool, then ends the thread. Idempotent. */
    close(): Promise<void>;
  };

/** One worker and the runs it has under way. */
interface RunnerThread {
  readonly worker: Worker;
  readonly send: (message: ToRunnerThread, urgent?: boolean) => void;
  readonly runs: Map<number, PendingRun>;
  readonly exited: Promise<void>;
  /** Why it failed, from its `error` event (an uncaught exception, running out of memory). */
  failure: Error | undefined;
}

interface PendingRun {
  readonly options: RunAgentOptions;
  resolve(result: AgentRunResult): void;
  reject(error: unknown): void;
  /** Checkpoints are stored one after another, and the run's end waits for the last. */
  stored: Promise<void>;
  /** The conversation of its last checkpoint, whose messages the next one starts with (the same objects). */
  messages: readonly ModelMessage[];
}

// Tests and `klym serve --conditions=klym-source` run the sources; the published package runs the build.
const THREAD_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './runner-thread.ts' : './runner-thread.js', import.meta.url);

/**
 * Runs tasks' agents (`runAgent`) on a worker thread, so that the thread which serves requests never
 * waits behind a run's model streams, upstream calls and redaction. The thread opens its own session
 * pool over `upstreams` for its whole life and a scope of it per run (named as the run's own `scope`);
 * the run's `pool` and `scope` are not used. Events and checkpoints reach the run's `onEvent` and
 * `onCheckpoint` in order; a call is sent only once its before-call checkpoint was stored. Aborting a
 * run's `signal` aborts it on the thread, its model request and calls included.
 *
 * If the thread dies (an uncaught exception, `process.exit`, out of memory), its runs reject with
 * `INTERNAL` ("The runner thread ended while the run was under way (it exited with code 1); …") and the
 * next run starts a fresh thread; the process goes on. A promise on the thread that rejects unhandled is
 * re-raised on the main thread, as it would have been had the run been inline.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an upstream given as a `connect()` function (naming it) or
 * otherwise invalid. A run rejects with `CONFIG_INVALID` when its `model` is a model object (only names
 * cross the thread) or an option cannot be copied to it, and with `SHUTTING_DOWN` after `close()`.
 * @example
 * ```ts
 * await using runner = createThreadRunner({ upstreams: { grynya: { url: 'http://127.0.0.1:8000/sse' } } })
 * const tasks = createTaskManager({ pool, run: runner })
 * ```
 */
export function createThreadRunner(options: ThreadRunnerOptions): ThreadRunner {
  const data: RunnerThreadData = {
    upstreams: portableUpstreams(options.upstreams),
    ...(options.clientInfo === undefined ? {} : { clientInfo: options.clientInfo }),
    // The AI SDK prints its warnings unless this global says not to; the thread has globals of its own.
    ...((globalThis as { AI_SDK_LOG_WARNINGS?: unknown }).AI_SDK_LOG_WARNINGS === false ? { aiSdkLogWarnings: false as const } : {}),
    niceness: nicenessOf(options.niceness ?? TASK_DEFAULTS.runnerNiceness),
    ...(options.setup === undefined ? {} : { setup: String(options.setup) }),
    observeCalls: options.onCall !== undefined,
  };
  const drainTimeoutMs = options.drainTimeoutMs ?? TASK_DEFAULTS.runnerDrainTimeoutMs;
  let current: RunnerThread | undefined;
  let nextId = 0;
  let closing: Promise<void> | undefined;

  const settle = (thread: RunnerThread, id: number, finish: (run: PendingRun) => void): void => {
    const run = thread.runs.get(id);
    if (run === undefined) return;
    thread.runs.delete(id);
    // An idle thread does not keep the process alive; one with runs under way does.
    if (thread.runs.size === 0 && closing === undefined) thread.worker.unref();
    // The run ends after its last checkpoint was stored, as an inline run does.
    void run.stored.then(() => finish(run));
  };

  const onMessage = (thread: RunnerThread, message: FromRunnerThread): void => {
    switch (message.type) {
      case 'event': {
        const onEvent = thread.runs.get(message.id)?.options.onEvent;
        try {
          // An async listener's rejection is its failure too: caught, it cannot crash the process as unhandled.
          const returned: unknown = onEvent?.(message.event);
          if (returned instanceof Promise) returned.catch(() => {});
        } catch {
          // A listener's failure is its own; the run goes on.
        }
        break;
      }
      case 'checkpoint': {
        const run = thread.runs.get(message.id);
        const { id, seq } = message;
        // Only a before-call checkpoint is answered: its call waits for the answer.
        const reply = (error?: unknown): void => {
          if (seq !== undefined)
            thread.send({ type: 'stored', id, seq, ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }) }, true);
        };
        if (run === undefined) {
          reply();
          break;
        }
        run.messages = applyConversationDelta(run.messages, message);
        const checkpoint: AgentCheckpoint = { ...message.checkpoint, messages: run.messages };
        const taken = seq === undefined ? NOT_BEFORE_CALL : BEFORE_CALL;
        run.stored = run.stored.then(() => store(run.options.onCheckpoint, checkpoint, taken)).then(() => reply(), reply);
        break;
      }
      case 'end': {
        const messages = applyConversationDelta(thread.runs.get(message.id)?.messages ?? [], message);
        settle(thread, message.id, (run) => run.resolve({ ...message.result, messages }));
        break;
      }
      case 'fail':
        settle(thread, message.id, (run) => run.reject(fromPortableError(message.error)));
        break;
      case 'artifact-call': {
        const { id, call } = message;
        const backend = thread.runs.get(id)?.options.artifacts;
        const answer = (reply: { readonly value?: unknown; readonly error?: PortableError }): void =>
          thread.send({ type: 'artifact-answer', id, call, ...reply }, true);
        if (backend === undefined) {
          answer({ error: { code: 'INTERNAL', message: `Run ${id} has no artifacts here (it ended, or was started without them)` } });
          break;
        }
        artifactCall(backend, message).then(
          (value) => answer({ value }),
          (error: unknown) => answer({ error: toPortableError(error) }),
        );
        break;
      }
      case 'gate': {
        const { id, call } = message;
        const open = (): void => thread.send({ type: 'gate-open', id, call }, true);
        const waiting = thread.runs.get(id)?.options.beforeStep?.();
        if (waiting === undefined) open();
        else waiting.then(open, open);
        break;
      }
      case 'log':
        try {
          options.onLog?.(message.entry);
        } catch {
          // The log's failure must not break a run.
        }
        break;
      case 'call':
        try {
          options.onCall?.(message.call);
        } catch {
          // An observer's failure must not break a run.
        }
        break;
      case 'rejection': {
        const error = Object.assign(
          new Error(message.error.message),
          { name: message.error.name },
          message.error.stack === undefined ? {} : { stack: message.error.stack },
        );
        void Promise.reject(error);
        break;
      }
      default:
        break;
    }
  };

  const spawn = (): RunnerThread => {
    const worker = new Worker(THREAD_ENTRY, { workerData: data });
    worker.unref();
    const exited = Promise.withResolvers<void>();
    const thread: RunnerThread = { worker, send: createSender<ToRunnerThread>(worker), runs: new Map(), exited: exited.promise, failure: undefined };
    worker.on('message', (batch: readonly FromRunnerThread[]) => {
      for (const message of batch) onMessage(thread, message);
    });
    worker.on('error', (error) => (thread.failure ??= error));
    worker.once('exit', (code) => {
      if (current === thread) current = undefined;
      const { failure } = thread;
      const why =
        closing !== undefined
          ? 'the runner was closed'
          : failure === undefined
            ? `it exited with code ${code}`
            : `it failed: ${failure.name}: ${failure.message}`;
      const message = `The runner thread ended while the run was under way (${why}); the next run starts a fresh thread`;
      for (const [id, run] of thread.runs) {
        // The thread's own error may quote anything a run held: it is scrubbed with the run's secrets.
        const redactor = createRedactor(secretsOf(run.options.secrets, run.options.providers));
        const error = new KlymError(
          closing === undefined ? 'INTERNAL' : 'SHUTTING_DOWN',
          redactor.text(message),
          failure === undefined ? {} : { cause: redactor.value(failure) },
        );
        settle(thread, id, (pending) => pending.reject(error));
      }
      exited.resolve();
    });
    return thread;
  };

  const run = (runOptions: RunAgentOptions): Promise<AgentRunResult> => {
    if (closing !== undefined) return Promise.reject(new KlymError('SHUTTING_DOWN', 'The runner thread is closed; the run was not started'));
    let portable: PortableRunOptions;
    try {
      portable = portableRunOptions(runOptions);
    } catch (error) {
      return Promise.reject(error);
    }
    const thread = (current ??= spawn());
    const id = ++nextId;
    return new Promise<AgentRunResult>((resolve, reject) => {
      const { signal, budgetSignal } = runOptions;
      const onAbort = (): void => thread.send({ type: 'abort', id }, true);
      const onBudget = (): void => thread.send({ type: 'budget', id, hit: outsideBudget(budgetSignal) as BudgetHit }, true);
      const unlisten = (): void => {
        signal?.removeEventListener('abort', onAbort);
        budgetSignal?.removeEventListener('abort', onBudget);
      };
      const pending: PendingRun = {
        options: runOptions,
        resolve: (result) => {
          unlisten();
          resolve(result);
        },
        reject: (error) => {
          unlisten();
          reject(error);
        },
        stored: Promise.resolve(),
        messages: runOptions.resume?.messages ?? [],
      };
      try {
        // Not batched: an option the structured clone refuses is the caller's error, and says so now.
        // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
        thread.worker.postMessage([{ type: 'run', id, options: portable } satisfies ToRunnerThread]);
      } catch (error) {
        reject(
          new KlymError('CONFIG_INVALID', `The run's options cannot be sent to the runner thread: ${error instanceof Error ? error.message : String(error)}`, {
            cause: error,
          }),
        );
        return;
      }
      thread.runs.set(id, pending);
      thread.worker.ref();
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
      if (budgetSignal?.aborted) onBudget();
      else budgetSignal?.addEventListener('abort', onBudget, { once: true });
    });
  };

  const close = (): Promise<void> => {
    closing ??= (async () => {
      const thread = current;
      current = undefined;
      if (thread === undefined) return;
      // Held now, so the process waits for the pool's orderly close instead of exiting under it.
      thread.worker.ref();
      const closed = new Promise<void>((resolve) =>
        thread.worker.on('message', (batch: readonly FromRunnerThread[]) => batch.some((message) => message.type === 'closed') && resolve()),
      );
      thread.send({ type: 'close', drainTimeoutMs });
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, drainTimeoutMs + 1_000)));
      await Promise.race([closed, thread.exited, deadline]);
      clearTimeout(timer);
      await thread.worker.terminate();
      await thread.exited;
    })();
    return closing;
  };

  // Started at once, so that its pool is connected by the first run; after a crash, by the next run.
  current = spawn();
  return Object.assign(run, { redactsEvents: true as const, close, [Symbol.asyncDispose]: close });
}

const BEFORE_CALL: CheckpointTaken = Object.freeze({ beforeCall: true });
const NOT_BEFORE_CALL: CheckpointTaken = Object.freeze({ beforeCall: false });

/** Stores one checkpoint through the run's listener, waiting for it if it returns a Promise. */
async function store(onCheckpoint: RunAgentOptions['onCheckpoint'], checkpoint: AgentCheckpoint, taken: CheckpointTaken): Promise<void> {
  await onCheckpoint?.(checkpoint, taken);
}

/** Carries out a run's artifact call on the main thread, where its task's store is. */
function artifactCall(backend: ArtifactBackend, call: ArtifactCall): Promise<unknown> {
  switch (call.op) {
    case 'save':
      return backend.save(call.artifact);
    case 'load':
      return backend.load(call.artifactId);
    case 'list':
      return backend.list();
    case 'query':
      if (backend.query === undefined) return Promise.reject(new KlymError('INTERNAL', "This run's artifacts have no DuckDB on the main thread"));
      return backend.query(call.sql, call.page);
  }
}

function nicenessOf(value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > 19)
    throw new KlymError('CONFIG_INVALID', `Expected \`niceness\` to be an integer from 0 to 19, got ${String(value)}`);
  return value;
}
