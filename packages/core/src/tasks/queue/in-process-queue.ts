import { KlymError } from '../../errors.ts';
import type { TaskConsumer, TaskQueue } from './task-queue.ts';

/**
 * The task manager's default {@link TaskQueue}: tasks wait in this process's memory, first in first out,
 * and run here, `concurrency` at a time. Nothing is shared: a task queued here runs here or not at all
 * (the store keeps it `pending`, and a manager started again over a durable store takes it up).
 */
export function createInProcessTaskQueue(): TaskQueue {
  const queued: string[] = [];
  const live = new Map<string, { readonly controller: AbortController; readonly done: Promise<void> }>();
  let consumer: TaskConsumer | undefined;
  let closing: Promise<void> | undefined;

  const pump = (): void => {
    const taker = consumer;
    if (taker === undefined || closing !== undefined) return;
    while (live.size < taker.concurrency && queued.length > 0) {
      const id = queued.shift() as string;
      const controller = new AbortController();
      const lease = { id, signal: controller.signal, released: () => false, holds: async () => true };
      const done = taker
        .run(lease)
        .then(() => {}, () => {})
        .finally(() => {
          live.delete(id);
          pump();
        });
      live.set(id, { controller, done });
    }
  };

  const queue: TaskQueue = {
    shared: false,
    open(taker) {
      if (consumer !== undefined) throw new KlymError('CONFIG_INVALID', 'This task queue already serves a task manager; give each manager a queue of its own');
      consumer = taker;
      pump();
    },
    async add(id) {
      if (queued.includes(id) || live.has(id)) return;
      queued.push(id);
      pump();
    },
    async cancel(id, reason) {
      const index = queued.indexOf(id);
      if (index >= 0) queued.splice(index, 1);
      live.get(id)?.controller.abort(new KlymError('ABORTED', `Task ${id} was cancelled: ${reason}`));
    },
    async waiting() {
      return queued.length;
    },
    hasFreeSlot: () => consumer !== undefined && live.size < consumer.concurrency,
    // No other process to tell.
    announce: () => {},
    close({ graceMs }) {
      closing ??= (async () => {
        const taker = consumer;
        if (taker === undefined) return;
        for (const id of queued.splice(0)) await taker.cancel(id);
        let timer: NodeJS.Timeout | undefined;
        const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
        await Promise.race([Promise.all([...live.values()].map((run) => run.done)), grace]);
        clearTimeout(timer);
        await Promise.all([...live.keys()].map((id) => taker.cancel(id)));
        await Promise.all([...live.values()].map((run) => run.done));
      })();
      return closing;
    },
  };
  return queue;
}
