// Klym processes sharing one task queue on a real redis-server, played inside one test process: fronts
// (`maxConcurrent: 0`) and workers, each with its own queue connections and its own pool over the fake grynya.
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { expect } from 'vitest';
import {
  createSessionPool,
  createTaskManager,
  runAgent,
  type AgentRunner,
  type TaskEvent,
  type TaskManager,
  type TaskRecord,
  type TaskStore,
} from '@klym/core';
import { createScriptedModel, type ScriptedStep } from '@klym/core/internal';
import { createBullmqTaskQueue, type BullmqTaskQueue, type BullmqTaskQueueOptions } from '@klym/core/redis';
import type { RedisServer } from './redis-server.ts';

/**
 * Opens the task store one Klym process uses over the Redis at `url`: every process of a test opens its
 * own, and they must share what they hold (one memory store object, or stores on one Redis).
 */
export type OpenSharedStore = (url: string) => Promise<TaskStore>;

/** One Klym process of a test. */
export interface KlymProcess {
  readonly name: string;
  readonly tasks: TaskManager;
  readonly queue: BullmqTaskQueue;
  /** What its queue logged. */
  readonly lines: string[];
  /** What its task manager told its listener. */
  readonly events: TaskEvent[];
}

/** Which runs happened where, across every process of a test. */
export interface RunTracker {
  /** The process that began each run of a task, in order. */
  readonly runs: Map<string, string[]>;
  /** The most runs of one task under way at once, in all processes, per task. */
  readonly overlap: Map<string, number>;
  /** Runs of each task under way now. */
  readonly underWay: Map<string, number>;
  /** Tasks whose model request saw its abort signal fire. */
  readonly modelAborted: Set<string>;
}

export const me = { principal: 'grynya' };

/**
 * What the scripted model answers, by the word its task's prompt starts with: `quick` answers at once;
 * `slow` after a moment; `tool` calls grynya's `query_graph` (which hangs while `grynya.faults.hang`), and
 * says so when a resumed run finds the call's outcome unknown; `model` waits until its request is aborted.
 */
function answer(
  id: string,
  tracker: RunTracker,
): (call: { options: { prompt: readonly { role: string; content: unknown }[]; abortSignal?: AbortSignal } }) => Promise<ScriptedStep> {
  return async ({ options }) => {
    const conversation = JSON.stringify(options.prompt.filter((message) => message.role !== 'system'));
    const [, kind] = /"text":"(quick|slow|tool|model) /.exec(conversation) ?? [];
    if (conversation.includes('outcome is unknown')) return { text: 'The query was interrupted; I did not run it again.' };
    if (conversation.includes('"tool-result"')) return { text: 'The graph answered.' };
    if (kind === 'tool') return { toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] };
    if (kind === 'slow') await new Promise((resolve) => setTimeout(resolve, 150));
    if (kind === 'model') {
      await new Promise<void>((resolve) => options.abortSignal?.addEventListener('abort', () => resolve(), { once: true }));
      tracker.modelAborted.add(id);
      throw options.abortSignal?.reason ?? new Error('aborted');
    }
    return { text: 'Done.' };
  };
}

/** The real runAgent with the scripted model, counting each run of a task and where it ran. */
function trackedRunner(processName: string, tracker: RunTracker): AgentRunner {
  return async (options) => {
    const id = options.scope?.id ?? 'unknown';
    tracker.runs.set(id, [...(tracker.runs.get(id) ?? []), processName]);
    const now = (tracker.underWay.get(id) ?? 0) + 1;
    tracker.underWay.set(id, now);
    tracker.overlap.set(id, Math.max(tracker.overlap.get(id) ?? 0, now));
    try {
      return await runAgent({ ...options, model: createScriptedModel({ steps: answer(id, tracker) }) });
    } finally {
      tracker.underWay.set(id, (tracker.underWay.get(id) ?? 1) - 1);
    }
  };
}

/** A test's Klym processes over one Redis and one fake grynya; `close()` ends them all, workers last. */
export interface SharedQueueRig {
  readonly grynya: FakeGrynya;
  readonly tracker: RunTracker;
  /** Unique per rig, so that rigs on one Redis never see each other's jobs. */
  readonly queueName: string;
  front(options?: ProcessOptions): Promise<KlymProcess>;
  worker(options?: ProcessOptions): Promise<KlymProcess>;
  close(): Promise<void>;
}

export interface ProcessOptions {
  /** @default 1 for a worker */
  readonly maxConcurrent?: number;
  readonly maxQueued?: number;
  readonly resumeOnRestart?: boolean;
  readonly queue?: Partial<BullmqTaskQueueOptions>;
}

let rigs = 0;

export async function openRig(redis: RedisServer, openStore: OpenSharedStore, url = redis.url): Promise<SharedQueueRig> {
  const grynya = await createFakeGrynya();
  const tracker: RunTracker = { runs: new Map(), overlap: new Map(), underWay: new Map(), modelAborted: new Set() };
  const queueName = `tasks${process.pid}x${++rigs}`;
  const opened: { tasks: TaskManager; close: () => Promise<void> }[] = [];
  let count = 0;
  const start = async (kind: 'front' | 'worker', options: ProcessOptions = {}): Promise<KlymProcess> => {
    const name = `${kind}-${++count}`;
    const lines: string[] = [];
    const events: TaskEvent[] = [];
    const store = await openStore(url);
    const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
    const queue = await createBullmqTaskQueue({ url, name: queueName, onLog: (line) => lines.push(line), ...options.queue });
    const tasks = createTaskManager({
      pool,
      store,
      queue,
      run: trackedRunner(name, tracker),
      onEvent: (event) => events.push(event),
      maxConcurrent: options.maxConcurrent ?? (kind === 'front' ? 0 : 1),
      ...(options.maxQueued === undefined ? {} : { maxQueued: options.maxQueued }),
      ...(options.resumeOnRestart === undefined ? {} : { resumeOnRestart: options.resumeOnRestart }),
    });
    opened.push({
      tasks,
      close: async () => {
        await tasks.close({ graceMs: 0 });
        await pool.close({ drainTimeoutMs: 100 });
        await store.close();
      },
    });
    return { name, tasks, queue, lines, events };
  };
  return {
    grynya,
    tracker,
    queueName,
    front: (options) => start('front', options),
    worker: (options) => start('worker', options),
    async close() {
      for (const process of opened.splice(0).toReversed()) await process.close();
      await grynya.close();
    },
  };
}

/** The task once it has ended, as `tasks` sees it. */
export async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 15_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

/** The types of a task's log entries, in order. */
export async function logTypes(tasks: TaskManager, id: string): Promise<string[]> {
  return (await tasks.logs(id, me, { limit: 500 })).entries.map((entry) => entry.type);
}

/** The `task-end` events a process's listener was told of for a task: its own ends and those it heard of. */
/** The lifecycle events a process's listeners heard of one task, in order. */
export const eventsOf = (process: KlymProcess, id: string): string[] => process.events.filter((event) => event.task.id === id).map((event) => event.type);

export const endsOf = (process: KlymProcess, id: string): string[] =>
  process.events.filter((event) => event.type === 'task-end' && event.task.id === id).map((event) => event.task.status);
