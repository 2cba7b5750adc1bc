import type { PrincipalUsage, TaskService, TaskStatus } from '@klym/core';
import type { ResolvedServerOptions } from '../server/server-options.ts';

/** The one label (and dashboard row) of every principal the configuration does not name: OAuth subjects, A2A agents. */
export const OTHER_PRINCIPALS = 'other';

/** What every principal the configuration does not name runs and queues, all together. */
export interface OtherPrincipalsUse {
  readonly running: number;
  readonly queued: number;
}

/**
 * The principals the configuration names, sorted: those of `auth.tokens` (`anonymous`, everyone's, when there
 * is no `auth`) and of `tasks.perPrincipal.overrides`. Only these become metric labels and dashboard rows, so
 * their number is the operator's to bound; a caller cannot add one. A principal called `other` is left out:
 * it counts with the others rather than share their label.
 */
export function principalNames(options: Pick<ResolvedServerOptions, 'auth' | 'tasks'>): readonly string[] {
  const tokens = options.auth === undefined ? ['anonymous'] : Object.keys(options.auth.tokens ?? {});
  const names = new Set([...tokens, ...Object.keys(options.tasks.perPrincipal?.overrides ?? {})]);
  names.delete(OTHER_PRINCIPALS);
  return [...names].toSorted();
}

/**
 * Each of `names`' limits, tasks running and waiting, and spend today: one `usage` per principal (its counts,
 * from the in-process queue or the store, and one read of its day's spend), all at once.
 * @throws {KlymError} `STORE_UNAVAILABLE` when the store does not answer
 */
export function readNamedUse(service: TaskService, names: readonly string[]): Promise<readonly PrincipalUsage[]> {
  return Promise.all(names.map((principal) => service.tasks.usage({ principal })));
}

/**
 * What the principals outside `named` run and queue: the store's `totals` (`summary()`) less the named ones'.
 * Read so, it needs no list of the others and holds on a shared store across processes.
 */
export function otherPrincipalsUse(totals: Readonly<Partial<Record<TaskStatus, number>>>, named: readonly PrincipalUsage[]): OtherPrincipalsUse {
  let running = 0;
  let queued = 0;
  for (const usage of named) {
    running += usage.running;
    queued += usage.queued;
  }
  // An in-process queue counts a task as running a moment before the store says so: never below zero.
  return { running: Math.max(0, (totals.running ?? 0) - running), queued: Math.max(0, (totals.pending ?? 0) - queued) };
}
