import { TASK_DEFAULTS } from '../../defaults.ts';
import { KlymError } from '../../errors.ts';
import { queuedQuotaExceeded, resolvePrincipalLimits, type PerPrincipalOptions, type PrincipalUsage } from './principal-quotas.ts';
import type { TaskPlacement, TaskQueue } from '../queue/task-queue.ts';
import { createDailySpend, type DailySpend } from './daily-spend.ts';
import { createRunTimes } from './run-times.ts';
import type { TaskRecord, TaskStore } from '../store/task-types.ts';

/** What {@link createTaskAdmission} needs: the manager's store and queue, and its limits. */
export interface TaskAdmissionOptions {
  readonly store: TaskStore;
  readonly queue: TaskQueue;
  /** Tasks waiting at most, all principals together (`TASK_QUEUE_FULL` past it). */
  readonly maxQueued: number;
  readonly perPrincipal?: PerPrincipalOptions;
  /** The clock of the days that spend is counted in (ms since the epoch). @default Date.now */
  readonly now?: () => number;
}

/** Who may start a task, and where it waits: fair turns between principals, and each one's quotas (issue #33). */
export interface TaskAdmission {
  /**
   * Checks a start of `principal`'s against its quotas, then against the queue's bound, and answers where its
   * task waits: its rank is 1 + its tasks not yet ended, so a newcomer's first task goes before a heavy
   * caller's next. `startsAtOnce`: this process has a slot free and the principal is under its `maxRunning`.
   * A principal with a `maxQueued` is admitted one start at a time in this process: the next waits until the
   * caller calls `admitted()`, once the task is in the queue (or its start failed), so that starts arriving
   * together are counted one after another and the quota holds exactly here. Call it in every case.
   * @throws {KlymError} `QUOTA_EXCEEDED` past its `maxQueued`, or once its day's spend is spent; `TASK_QUEUE_FULL` past `maxQueued`; `STORE_UNAVAILABLE`
   */
  admit(principal: string): Promise<{ readonly placement: TaskPlacement; readonly startsAtOnce: boolean; readonly admitted: () => void }>;
  /**
   * Where each task a restart takes up waits: its rank is 1 + its principal's unfinished tasks created
   * before it, so that it keeps the place it had. `found` is `store.unfinished()`, oldest first.
   */
  placementsOf(found: readonly TaskRecord[]): ReadonlyMap<string, TaskPlacement>;
  /** How many of `principal`'s tasks may run at once; `undefined`: no limit of its own (the queue's `runningLimit`). */
  runningLimit(principal: string): number | undefined;
  /** `principal`'s limits, and its tasks running and waiting. @throws {KlymError} `STORE_UNAVAILABLE` */
  usage(principal: string): Promise<PrincipalUsage>;
  /** Counts a task that ended (here, or heard of), for how long to ask a refused caller to wait. */
  ended(task: TaskRecord): void;
  /** What each principal's runs spend per day, against its daily limits. */
  readonly spend: DailySpend;
}

/**
 * Creates the manager's admission of starts. Counts come from the in-process queue, or for a shared one from
 * the store (`list`'s `total` of the principal's `pending` and `running` tasks), so they hold across processes.
 * A principal's `maxQueued` holds exactly within a process (its starts are admitted one at a time); starts at
 * the same moment in different processes may pass it by as many as there are processes, and the queue's
 * bound (`maxQueued` of all principals) by as many as start together.
 */
export function createTaskAdmission(options: TaskAdmissionOptions): TaskAdmission {
  const { store, queue, maxQueued } = options;
  const limitsOf = resolvePrincipalLimits(options.perPrincipal);
  const spend = createDailySpend(store, limitsOf, options.now ?? Date.now);
  const runTimes = createRunTimes();
  const count = async (principal: string, status: 'pending' | 'running'): Promise<number> => (await store.list({ principal, status }, { limit: 1 })).total;
  // Until a run has ended here, a fixed wait; then the typical run's, rounded up to a second.
  const retryAfterMs = (): number => Math.max(1_000, Math.ceil((runTimes.median() ?? TASK_DEFAULTS.retryAfterMs) / 1_000) * 1_000);

  /** `principal`'s tasks waiting and running. An in-process queue knows them; a shared one's are counted in the store (two indexed counts). */
  const tasksOf = async (principal: string): Promise<{ readonly queued: number; readonly running: number }> => {
    const own = queue.usage?.(principal);
    if (own !== undefined) return own;
    const [queued, running] = await Promise.all([count(principal, 'pending'), count(principal, 'running')]);
    return { queued, running };
  };
  const usage = async (principal: string): Promise<PrincipalUsage> => {
    const [{ queued, running }, today] = await Promise.all([tasksOf(principal), spend.today(principal)]);
    return { principal, limits: limitsOf(principal).limits, running, queued, today };
  };

  /** The last admission under way of each principal with a `maxQueued`: the next one waits for it. */
  const lines = new Map<string, Promise<void>>();
  const check = async (principal: string): Promise<{ readonly placement: TaskPlacement; readonly startsAtOnce: boolean }> => {
    const { limits } = limitsOf(principal);
    const [{ queued, running }, spent] = await Promise.all([tasksOf(principal), spend.reached(principal)]);
    if (spent !== undefined) throw spend.refusal(principal, spent, 'no task of its starts before the day turns');
    if (limits.maxQueued !== undefined && queued >= limits.maxQueued) {
      throw queuedQuotaExceeded(principal, limitsOf(principal), queued, retryAfterMs());
    }
    const waiting = await queue.waiting();
    if (waiting >= maxQueued) {
      const message = `Klym has ${waiting} tasks waiting (tasks.maxQueued ${maxQueued}); try again when some have started`;
      throw new KlymError('TASK_QUEUE_FULL', message, { limit: maxQueued, used: waiting, retryAfterMs: retryAfterMs() });
    }
    const underCap = limits.maxRunning === undefined || running < limits.maxRunning;
    return { placement: { principal, rank: 1 + queued + running }, startsAtOnce: underCap && queue.hasFreeSlot() };
  };

  return {
    async admit(principal) {
      if (limitsOf(principal).limits.maxQueued === undefined) return { ...(await check(principal)), admitted: () => {} };
      const before = lines.get(principal) ?? Promise.resolve();
      let admitted!: () => void;
      const mine = new Promise<void>((resolve) => (admitted = resolve));
      lines.set(principal, mine);
      void mine.then(() => lines.get(principal) === mine && lines.delete(principal));
      await before;
      try {
        return { ...(await check(principal)), admitted };
      } catch (error) {
        admitted();
        throw error;
      }
    },
    placementsOf(found) {
      const placements = new Map<string, TaskPlacement>();
      const before = new Map<string, number>();
      const unfinished = found.filter((task) => task.status === 'pending' || task.status === 'running');
      // Stable: tasks created in the same millisecond keep the store's order.
      for (const task of unfinished.toSorted((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt))) {
        const earlier = before.get(task.principal) ?? 0;
        placements.set(task.id, { principal: task.principal, rank: 1 + earlier });
        before.set(task.principal, earlier + 1);
      }
      return placements;
    },
    runningLimit: (principal) => limitsOf(principal).limits.maxRunning,
    usage,
    ended: (task) => runTimes.record(task),
    spend,
  };
}
