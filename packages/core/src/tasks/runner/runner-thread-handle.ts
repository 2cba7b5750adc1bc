import { Worker } from 'node:worker_threads';
import type { ModelMessage } from 'ai';
import type { AgentCheckpoint, AgentRunResult, CheckpointTaken, RunAgentOptions } from '../../agent/types.ts';
import type { ArtifactBackend } from '../../artifacts/artifact-types.ts';
import { KlymError } from '../../errors.ts';
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
  type RunnerThreadData,
  type ToRunnerThread,
} from './runner-messages.ts';

/** One worker and the runs it has under way, as the main thread sees them. */
export interface RunnerThread {
  /** Its place among the runner's threads: the share of each upstream's `pool.max` it was started with. */
  readonly index: number;
  readonly worker: Worker;
  readonly send: (message: ToRunnerThread, urgent?: boolean) => void;
  readonly runs: Map<number, PendingRun>;
  readonly exited: Promise<void>;
  /** Why it failed, from its `error` event (an uncaught exception, running out of memory). */
  failure: Error | undefined;
}

/** A run posted to a thread, until it settles. */
export interface PendingRun {
  readonly options: RunAgentOptions;
  resolve(result: AgentRunResult): void;
  reject(error: unknown): void;
  /** Checkpoints are stored one after another, and the run's end waits for the last. */
  stored: Promise<void>;
  /** The conversation of its last checkpoint, whose messages the next one starts with (the same objects). */
  messages: readonly ModelMessage[];
}

/** What a thread reports to the runner that started it. */
export interface RunnerThreadHooks {
  readonly onLog?: ((entry: UpstreamLogEntry) => void) | undefined;
  readonly onCall?: ((call: UpstreamCall) => void) | undefined;
  /** Whether the runner is closing: then an idle thread stays referenced, and its runs end as `SHUTTING_DOWN`. */
  closing(): boolean;
  /** The thread exited (its runs have been rejected): the runner forgets it, and a later run starts a fresh one. */
  onExit(thread: RunnerThread): void;
}

// Tests and `klym serve --conditions=klym-source` run the sources; the published package runs the build.
const THREAD_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './runner-thread.ts' : './runner-thread.js', import.meta.url);

/**
 * Starts one runner thread (`runner-thread.ts`) with `data` and answers what it asks on the main thread:
 * events to each run's `onEvent`, checkpoints stored in order through its `onCheckpoint`, its artifact
 * calls and gates, its pool's log and calls. If it exits, its runs (and only its) reject: `INTERNAL`, or
 * `SHUTTING_DOWN` while the runner closes, redacted with each run's secrets.
 */
/** The errors a run failed with because its thread ended under it (not at the runner's close). */
const lostRuns = new WeakSet<Error>();

/**
 * Whether a run failed because its runner thread ended under it (it crashed, ran out of memory, was killed):
 * nothing of the run's own went wrong, and its task can go on from its checkpoint on a fresh thread.
 */
export const isRunnerLost = (error: unknown): boolean => error instanceof Error && lostRuns.has(error);

export function startRunnerThread(index: number, data: RunnerThreadData, hooks: RunnerThreadHooks): RunnerThread {
  const worker = new Worker(THREAD_ENTRY, { workerData: data });
  worker.unref();
  const exited = Promise.withResolvers<void>();
  const thread: RunnerThread = { index, worker, send: createSender<ToRunnerThread>(worker), runs: new Map(), exited: exited.promise, failure: undefined };
  worker.on('message', (batch: readonly FromRunnerThread[]) => {
    for (const message of batch) onMessage(thread, message, hooks);
  });
  worker.on('error', (error) => (thread.failure ??= error));
  worker.once('exit', (code) => {
    hooks.onExit(thread);
    const { failure } = thread;
    const closing = hooks.closing();
    const why = closing ? 'the runner was closed' : failure === undefined ? `it exited with code ${code}` : `it failed: ${failure.name}: ${failure.message}`;
    const message = `The runner thread ended while the run was under way (${why}); the next run starts a fresh thread`;
    for (const [id, run] of thread.runs) {
      // The thread's own error may quote anything a run held: it is scrubbed with the run's secrets.
      const redactor = createRedactor(secretsOf(run.options.secrets, run.options.providers, run.options.pool));
      const error = new KlymError(
        closing ? 'SHUTTING_DOWN' : 'INTERNAL',
        redactor.text(message),
        failure === undefined ? {} : { cause: redactor.value(failure) },
      );
      if (!closing) lostRuns.add(error);
      settle(thread, id, hooks, (pending) => pending.reject(error));
    }
    exited.resolve();
  });
  return thread;
}

function settle(thread: RunnerThread, id: number, hooks: RunnerThreadHooks, finish: (run: PendingRun) => void): void {
  const run = thread.runs.get(id);
  if (run === undefined) return;
  thread.runs.delete(id);
  // An idle thread does not keep the process alive; one with runs under way does.
  if (thread.runs.size === 0 && !hooks.closing()) thread.worker.unref();
  // The run ends after its last checkpoint was stored, as an inline run does.
  void run.stored.then(() => finish(run));
}

function onMessage(thread: RunnerThread, message: FromRunnerThread, hooks: RunnerThreadHooks): void {
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
      settle(thread, message.id, hooks, (run) => run.resolve({ ...message.result, messages }));
      break;
    }
    case 'fail':
      settle(thread, message.id, hooks, (run) => run.reject(fromPortableError(message.error)));
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
        hooks.onLog?.(message.entry);
      } catch {
        // The log's failure must not break a run.
      }
      break;
    case 'call':
      try {
        hooks.onCall?.(message.call);
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
}

/**
 * Closes one thread in order: it aborts its runs, closes their scopes and its pool (`drainTimeoutMs`),
 * says `closed`, and is then terminated (at most a second past the drain, whatever it said).
 */
export async function closeRunnerThread(thread: RunnerThread, drainTimeoutMs: number): Promise<void> {
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
