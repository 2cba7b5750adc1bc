// Fair turns on the shared queue, seen from the queue itself: fronts and workers are BullMQ task queues opened
// with a small consumer instead of a task manager, so that a test places each task itself (`add(id, placement)`)
// and decides when each run ends. A task's principal is the first letter of its id: `a07` is A's.
import type { TaskConsumer, TaskPlacement } from '@klym/core/engine';
import { createBullmqTaskQueue, type BullmqTaskQueue, type BullmqTaskQueueOptions } from '@klym/core/redis';

/** The principal of a test's task: `a07` → `A`. */
export const principalOfTask = (id: string): string => id.slice(0, 1).toUpperCase();

/** `a01` … for `count` tasks of `principal`'s, each placed at its rank as the manager does (1 + its tasks not yet ended). */
export const backlog = (principal: string, count: number, from = 1): [string, TaskPlacement][] =>
  Array.from({ length: count }, (_, index) => [`${principal.toLowerCase()}${String(from + index).padStart(2, '0')}`, { principal, rank: from + index }]);

/** Every run of a test, in every worker of this process. */
export interface RunBook {
  /** Each run as it began, in order: the task and the worker. */
  readonly starts: { readonly id: string; readonly on: string }[];
  /** Runs under way now: task → worker. */
  readonly underWay: Map<string, string>;
  /** The most runs of each principal under way at once. */
  readonly peak: Map<string, number>;
  /** Principals whose runs were under way at once, as `A+B` (sorted). */
  readonly together: Set<string>;
  /** Lets the run of `id` end (now, or as soon as it begins). */
  finish(id: string): void;
  /** Resolves once the test lets the run of `id` end. */
  finished(id: string): Promise<void>;
}

export function createRunBook(): RunBook {
  const gates = new Map<string, PromiseWithResolvers<void>>();
  const gate = (id: string): PromiseWithResolvers<void> => {
    let found = gates.get(id);
    if (found === undefined) gates.set(id, (found = Promise.withResolvers<void>()));
    return found;
  };
  return {
    starts: [],
    underWay: new Map(),
    peak: new Map(),
    together: new Set(),
    finish: (id) => gate(id).resolve(),
    finished: (id) => gate(id).promise,
  };
}

/** What a test's process is: its name (in the run book), its concurrency (0: a front), the principals' caps, its queue's options. */
export interface QueueProcess {
  readonly name: string;
  readonly concurrency: number;
  readonly limits?: Record<string, number>;
  readonly queue?: Partial<BullmqTaskQueueOptions>;
  readonly onStart?: (id: string) => void;
}

/**
 * A consumer that records its runs in `book` and ends each when the test says (`book.finish`) or when the queue
 * takes it back; `limits` is each principal's `runningLimit`. `onStart` hears each run as it begins.
 */
export function bookConsumer(name: string, book: RunBook, options: Omit<QueueProcess, 'name' | 'queue'>): TaskConsumer {
  const running = (principal: string): number => [...book.underWay.keys()].filter((id) => principalOfTask(id) === principal).length;
  return {
    concurrency: options.concurrency,
    runningLimit: (principal) => options.limits?.[principal],
    async run(lease) {
      const principal = principalOfTask(lease.id);
      book.starts.push({ id: lease.id, on: name });
      book.underWay.set(lease.id, name);
      book.peak.set(principal, Math.max(book.peak.get(principal) ?? 0, running(principal)));
      for (const other of new Set([...book.underWay.keys()].map(principalOfTask)))
        if (other !== principal) book.together.add([principal, other].toSorted().join('+'));
      options.onStart?.(lease.id);
      const { promise: taken, resolve } = Promise.withResolvers<void>();
      lease.signal.addEventListener('abort', () => resolve(), { once: true });
      await Promise.race([book.finished(lease.id), taken]);
      book.underWay.delete(lease.id);
      // A run the queue took back leaves its task for another worker; any other has ended it.
      return lease.released() ? 'left' : 'ended';
    },
    cancel: async () => {},
    interrupt: async () => {},
    hasEnded: async () => false,
    heardElsewhere: () => {},
  };
}

/** A queue on `url` named `name`, opened as a front (`concurrency` 0) or a worker, with a {@link bookConsumer}. */
export async function openQueue(url: string, name: string, book: RunBook, process: QueueProcess): Promise<BullmqTaskQueue> {
  const queue = await createBullmqTaskQueue({ url, name, ...process.queue });
  queue.open(bookConsumer(process.name, book, process));
  return queue;
}
