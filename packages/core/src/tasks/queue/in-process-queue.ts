import { KlymError } from '../../errors.ts';
import type { TaskConsumer, TaskPlacement, TaskQueue } from './task-queue.ts';

/** A task queued without a placement waits behind every rank-1 task and ahead of every rank-2 one, as `TaskQueue.add` says. */
const UNPLACED_RANK = 1.5;

/** One principal's tasks here: those waiting, in arrival order, and how many run. */
interface Group {
  /** `undefined` for the tasks queued without a placement: no principal, so no cap. */
  readonly principal: string | undefined;
  readonly waiting: string[];
  running: number;
}

/** A turn to start a task: a group's, at a task's rank, in the order tasks arrived. */
interface Turn {
  readonly group: Group;
  readonly rank: number;
  readonly arrival: number;
}

/** Whether turn `a` comes before turn `b`: by rank, then by arrival. */
const before = (a: Turn, b: Turn): boolean => a.rank < b.rank || (a.rank === b.rank && a.arrival < b.arrival);

/**
 * The task manager's default {@link TaskQueue}: tasks wait in this process's memory and run here,
 * `concurrency` at a time, in fair turns (issue #33). Each task brings a turn, its placement's rank: waiting
 * turns are taken by rank, then in arrival order, so a principal's first waiting task starts before any
 * principal's second. A principal always starts its oldest waiting task with the best turn it holds, so its
 * own tasks start in the order they came even when a later one brought a better rank (its earlier tasks
 * were ranked when more of its tasks were unfinished). A principal at its `consumer.runningLimit` is passed
 * over: its tasks wait, and others start. Nothing is shared: a task queued here runs here or not at all (the
 * store keeps it `pending`, and a manager started again over a durable store takes it up).
 */
export function createInProcessTaskQueue(): TaskQueue {
  /** Every waiting turn, in the order they are taken; as many as waiting tasks. */
  const turns: Turn[] = [];
  const groups = new Map<string | undefined, Group>();
  /** Each waiting task's group. */
  const queued = new Map<string, Group>();
  const live = new Map<string, { readonly controller: AbortController; readonly done: Promise<void> }>();
  // Tasks added again while their run here was ending (a question answered as its run parked): queued once it has.
  const again = new Map<string, TaskPlacement | undefined>();
  let arrivals = 0;
  let consumer: TaskConsumer | undefined;
  let closing: Promise<void> | undefined;

  const groupOf = (principal: string | undefined): Group => {
    let group = groups.get(principal);
    if (group === undefined) groups.set(principal, (group = { principal, waiting: [], running: 0 }));
    return group;
  };
  // A principal with nothing here is forgotten, so that many callers over time do not grow the map.
  const forgetIfIdle = (group: Group): void => {
    if (group.waiting.length === 0 && group.running === 0) groups.delete(group.principal);
  };
  const atCap = (taker: TaskConsumer, group: Group): boolean => {
    const limit = group.principal === undefined ? undefined : taker.runningLimit?.(group.principal);
    return limit !== undefined && group.running >= limit;
  };
  /** Where the group's `index`-th best turn is in {@link turns}, which is how many waiting turns come before it. */
  const turnIndex = (group: Group, index: number): number => {
    let seen = 0;
    for (const [where, turn] of turns.entries()) {
      if (turn.group !== group) continue;
      if (seen === index) return where;
      seen++;
    }
    return -1;
  };

  const launch = (taker: TaskConsumer, id: string, group: Group): void => {
    const controller = new AbortController();
    const lease = { id, signal: controller.signal, released: () => false, holds: async () => true };
    group.running++;
    const done = taker
      .run(lease)
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        live.delete(id);
        group.running--;
        forgetIfIdle(group);
        if (again.has(id)) {
          const placement = again.get(id);
          again.delete(id);
          enqueue(id, placement);
        }
        pump();
      });
    live.set(id, { controller, done });
  };

  const pump = (): void => {
    const taker = consumer;
    if (taker === undefined || closing !== undefined) return;
    while (live.size < taker.concurrency) {
      const index = turns.findIndex((turn) => !atCap(taker, turn.group));
      if (index < 0) return;
      const { group } = turns.splice(index, 1)[0] as Turn;
      const id = group.waiting.shift() as string;
      queued.delete(id);
      launch(taker, id, group);
    }
  };

  const enqueue = (id: string, placement: TaskPlacement | undefined): void => {
    const group = groupOf(placement?.principal);
    const turn: Turn = { group, rank: placement?.rank ?? UNPLACED_RANK, arrival: ++arrivals };
    group.waiting.push(id);
    queued.set(id, group);
    // Turns mostly arrive last in line (a heavy caller's next task): look from the end.
    let at = turns.length;
    while (at > 0 && before(turn, turns[at - 1] as Turn)) at--;
    turns.splice(at, 0, turn);
  };

  const queue: TaskQueue = {
    shared: false,
    open(taker) {
      if (consumer !== undefined) throw new KlymError('CONFIG_INVALID', 'This task queue already serves a task manager; give each manager a queue of its own');
      consumer = taker;
      pump();
    },
    async add(id, placement) {
      if (queued.has(id)) return;
      if (live.has(id)) return void again.set(id, placement);
      enqueue(id, placement);
      pump();
    },
    async position(id) {
      const group = queued.get(id);
      return group === undefined ? undefined : turnIndex(group, group.waiting.indexOf(id));
    },
    async cancel(id, reason) {
      const group = queued.get(id);
      if (group !== undefined) {
        // The task gives up the turn it held: every task behind that turn moves up one.
        const index = group.waiting.indexOf(id);
        turns.splice(turnIndex(group, index), 1);
        group.waiting.splice(index, 1);
        queued.delete(id);
        forgetIfIdle(group);
      }
      live.get(id)?.controller.abort(new KlymError('ABORTED', `Task ${id} was cancelled: ${reason}`));
    },
    async waiting() {
      return queued.size;
    },
    usage(principal) {
      const group = groups.get(principal);
      return { queued: group?.waiting.length ?? 0, running: group?.running ?? 0 };
    },
    hasFreeSlot: () => consumer !== undefined && live.size < consumer.concurrency,
    // No other process to tell.
    announce: () => {},
    close({ graceMs }) {
      closing ??= (async () => {
        const taker = consumer;
        if (taker === undefined) return;
        const left = [...queued.keys()];
        turns.length = 0;
        queued.clear();
        for (const group of groups.values()) group.waiting.length = 0;
        for (const id of left) await taker.cancel(id);
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
