import type { ModelMessage } from 'ai';
import type { BudgetHit } from '../../agent/budget.ts';
import type { AgentCheckpoint, AgentRunResult, RunSettings } from '../../agent/types.ts';
import type { AgentEvent } from '../../agent/agent-event.ts';
import { KlymError, isKlymError, type KlymErrorCode } from '../../errors.ts';
import type { UpstreamConfig } from '../../pool/upstream-config.ts';
import type { UpstreamLogEntry } from '../../pool/upstream-session.ts';
import type { AgentTracing } from '../../agent/agent-tracing.ts';
import type { UpstreamCall } from '../../pool/upstream-status.ts';
import type { QueryPage, StoredArtifact } from '../../artifacts/artifact-types.ts';

/** What the runner thread is started with (`workerData`). */
export interface RunnerThreadData {
  /** HTTP and stdio upstreams only, their `url` a string: what survives the structured clone. */
  readonly upstreams: Readonly<Record<string, UpstreamConfig>>;
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** The main thread's `AI_SDK_LOG_WARNINGS` when it turned the AI SDK's warnings off: a global is per thread. */
  readonly aiSdkLogWarnings?: false;
  /** Steps below the process's scheduling priority the thread runs at. */
  readonly niceness: number;
  /** The module the thread imports before any run (`ThreadRunnerOptions.setup`), as a URL string. */
  readonly setup?: string;
  /** Whether the main thread listens to the pool's calls (`onCall`): only then are they sent. */
  readonly observeCalls: boolean;
}

/** The part of a run's options that crosses the thread; the thread supplies the pool, scope, signal and listeners. */
export type PortableRunOptions = RunSettings & {
  /** Whether the run has artifacts of its task to keep: the thread then keeps them through the main thread (`artifact-call`). */
  readonly artifacts: boolean;
  /** Whether the task's artifacts are queried in its DuckDB on the main thread (`artifact-call` `query`); otherwise the run opens its own. */
  readonly queries?: boolean;
  /** The run's tracing without its tracer (the thread's registered provider makes the spans), its parent as W3C data. */
  readonly tracing?: Omit<AgentTracing, 'tracer'>;
  /** The scope's id on the main thread (the task's id): the thread opens its own scope under it. */
  readonly scopeId: string;
  /** Whether the run waits before each step for the main thread to count the step before (`beforeStep`: `gate`, `gate-open`). */
  readonly gated?: boolean;
};

/** What a run on the thread asks of its task's artifacts. */
export type ArtifactCall =
  | { readonly op: 'save'; readonly artifact: StoredArtifact }
  | { readonly op: 'load'; readonly artifactId: string }
  | { readonly op: 'list' }
  /** A query in the task's DuckDB, on the main thread with the task's store; the task's own signal interrupts it there. */
  | { readonly op: 'query'; readonly sql: string; readonly page: QueryPage };

/** An error as it crosses the thread: a `KlymError`'s fields, or any error's message as `INTERNAL`. */
export interface PortableError {
  readonly code: KlymErrorCode;
  readonly message: string;
  readonly upstream?: string;
  readonly toolName?: string;
}

/** From the main thread to the runner thread. */
export type ToRunnerThread =
  | { readonly type: 'run'; readonly id: number; readonly options: PortableRunOptions }
  | { readonly type: 'abort'; readonly id: number }
  /** A budget kept outside run `id` (its principal's day) is spent: the run stops as its own budgets stop it. */
  | { readonly type: 'budget'; readonly id: number; readonly hit: BudgetHit }
  /** Run `id` may take its next step: what the main thread counted of the step before is answered (a `budget` before it, if spent). */
  | { readonly type: 'gate-open'; readonly id: number; readonly call: number }
  /** The checkpoint `seq` of run `id` was stored (or failed to be, with `error`). */
  | { readonly type: 'stored'; readonly id: number; readonly seq: number; readonly error?: string }
  | { readonly type: 'close'; readonly drainTimeoutMs: number }
  /** The answer to the run's artifact call `call`: its value, or why it failed. */
  | { readonly type: 'artifact-answer'; readonly id: number; readonly call: number; readonly value?: unknown; readonly error?: PortableError };

/** A conversation as the first `kept` messages of the one the receiver holds for the run, then `added`. */
export interface ConversationDelta {
  readonly kept: number;
  readonly added: readonly ModelMessage[];
}

/** From the runner thread to the main thread. */
export type FromRunnerThread =
  | { readonly type: 'event'; readonly id: number; readonly event: AgentEvent }
  /**
   * A checkpoint, its conversation as a delta: the first `kept` messages of the run's previous checkpoint
   * (or of its `resume`), then `added`. The receiver rebuilds it from its own objects, so a store that
   * appends by identity (SQLite's) still appends, and only new messages are copied across. `seq` is set
   * on a before-call checkpoint only: its call waits for the `stored` answer of that `seq`; nothing waits
   * for the others, which get no answer.
   */
  | ({ readonly type: 'checkpoint'; readonly id: number; readonly seq?: number; readonly checkpoint: Omit<AgentCheckpoint, 'messages'> } & ConversationDelta)
  /** A run's result, its `messages` as a delta from its last checkpoint's, as a checkpoint's are. */
  | ({ readonly type: 'end'; readonly id: number; readonly result: Omit<AgentRunResult, 'messages'> } & ConversationDelta)
  | { readonly type: 'fail'; readonly id: number; readonly error: PortableError }
  /** Run `id` keeps, reads or lists its task's artifacts, which the main thread holds (the task store); answered by `artifact-answer`. */
  | ({ readonly type: 'artifact-call'; readonly id: number; readonly call: number } & ArtifactCall)
  /** Run `id` waits to take its next step until the main thread's `beforeStep` resolves (answered by `gate-open`). */
  | { readonly type: 'gate'; readonly id: number; readonly call: number }
  | { readonly type: 'log'; readonly entry: UpstreamLogEntry }
  /** A tool call of the thread's pool ended (sent only with `observeCalls`). */
  | { readonly type: 'call'; readonly call: UpstreamCall }
  /** A promise on the thread rejected and nobody handled it. */
  | { readonly type: 'rejection'; readonly error: { readonly name: string; readonly message: string; readonly stack?: string } }
  | { readonly type: 'closed' };

/** A run's failure as it crosses the thread. */
export function toPortableError(error: unknown): PortableError {
  if (isKlymError(error)) {
    return {
      code: error.code,
      message: error.message,
      ...(error.upstream === undefined ? {} : { upstream: error.upstream }),
      ...(error.toolName === undefined ? {} : { toolName: error.toolName }),
    };
  }
  return { code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
}

/** A run's failure as the caller receives it: a `KlymError` of the code and message it had on the thread. */
export function fromPortableError(error: PortableError): KlymError {
  return new KlymError(error.code, error.message, {
    ...(error.upstream === undefined ? {} : { upstream: error.upstream }),
    ...(error.toolName === undefined ? {} : { toolName: error.toolName }),
  });
}

/** `next` as a delta from `previous`: the leading messages they share (by identity) counted, the rest copied. */
export function conversationDelta(previous: readonly ModelMessage[], next: readonly ModelMessage[]): ConversationDelta {
  const limit = Math.min(previous.length, next.length);
  let kept = 0;
  while (kept < limit && previous[kept] === next[kept]) kept++;
  return { kept, added: kept === next.length ? [] : next.slice(kept) };
}

/** The conversation a {@link ConversationDelta} stands for, from `held`: `held` itself when nothing changed. */
export function applyConversationDelta(held: readonly ModelMessage[], delta: ConversationDelta): readonly ModelMessage[] {
  if (delta.kept === held.length && delta.added.length === 0) return held;
  return [...held.slice(0, delta.kept), ...delta.added];
}

/**
 * Sends messages to the other thread in batches: those sent within one turn of the event loop go as one
 * array, in order, so that a run's dozens of events cost one hand-over, not one each. A message someone
 * waits for (`urgent`: a before-call checkpoint, its answer, a run's end) goes out with the batch at the
 * end of the current task instead: on a busy loop the next turn can be tens of milliseconds away, and a
 * tool call waits for that round trip. "The end of the task" is a `process.nextTick`, which runs once
 * the microtasks queued so far and those they queue have run: the answers to a batch of checkpoints,
 * each a promise's reaction, go back as one batch. A batch the structured clone refuses (a class
 * instance in a provider's metadata, say) goes as its JSON instead, which is what a run's results and
 * checkpoints are promised to survive.
 */
export function createSender<Message>(port: { postMessage(value: unknown): void }): (message: Message, urgent?: boolean) => void {
  let batch: Message[] = [];
  let scheduled: 'turn' | 'task' | undefined;
  const flush = (): void => {
    scheduled = undefined;
    if (batch.length === 0) return;
    const sending = batch;
    batch = [];
    try {
      // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a worker's port has no target origin
      port.postMessage(sending);
    } catch (error) {
      if (!(error instanceof Error && error.name === 'DataCloneError')) throw error;
      // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a worker's port has no target origin
      port.postMessage(JSON.parse(JSON.stringify(sending)) as unknown);
    }
  };
  return (message, urgent = false) => {
    batch.push(message);
    if (urgent && scheduled !== 'task') {
      scheduled = 'task';
      process.nextTick(flush);
    } else if (scheduled === undefined) {
      scheduled = 'turn';
      setImmediate(flush);
    }
  };
}
