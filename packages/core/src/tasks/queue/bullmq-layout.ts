import { createRequire } from 'node:module';
import type { Queue } from 'bullmq';
import { KlymError } from '../../errors.ts';

/*
 * The one place where Klym relies on how BullMQ lays its queue out in Redis, rather than on its API: BullMQ
 * has no call that tells a waiting job's place, and none that says whether a job waits to be fetched. What
 * is relied on, as BullMQ 6 does it (its `moveToActive`, `addPrioritizedJob`, `getCountsPerPriority` and
 * `moveStalledJobsToWait` scripts):
 *
 * - `wait` is a list that workers take from its right end before they look at `prioritized` (a job put back
 *   by the stalled-job check is pushed there, so it is next);
 * - `prioritized` is a sorted set that workers take lowest score first, a job's score being its priority
 *   × 2^32 + a counter of arrivals, so that equal priorities keep their order;
 * - `delayed` is a sorted set of the jobs waiting for a time (Klym's parked ones among them);
 * - a job's hash is at `toKey(id)` until the job is removed.
 *
 * Key names come from the queue (`keys`, `toKey`), so a prefix or name is never rebuilt here. The version is
 * checked when the queue is made, so that a BullMQ that may lay it out otherwise fails at once, by name.
 */

/** The major version of BullMQ whose layout this file describes. */
const KNOWN_MAJOR = 6;

/** BullMQ's keys of one queue that Klym reads, and the prefix of its jobs' keys. */
export interface BullmqLayout {
  readonly wait: string;
  readonly prioritized: string;
  readonly delayed: string;
  /** `<prefix>:<name>:`: a job's hash is this and its id. */
  readonly jobPrefix: string;
}

/**
 * The layout of `queue` in Redis.
 * @throws {KlymError} `CONFIG_INVALID` when the installed BullMQ is not the major version this file knows, or
 * its queue lacks one of the keys relied on.
 */
export function bullmqLayoutOf(queue: Queue): BullmqLayout {
  const version = installedVersion();
  const { wait, prioritized, delayed } = queue.keys;
  if (Number.parseInt(version, 10) !== KNOWN_MAJOR || wait === undefined || prioritized === undefined || delayed === undefined) {
    throw new KlymError(
      'CONFIG_INVALID',
      `Klym's task queue reads BullMQ ${KNOWN_MAJOR}'s keys in Redis (the wait list, the prioritized and delayed sets) to ` +
        `tell a task's place; the installed BullMQ is ${version}, which may lay them out otherwise. Install BullMQ ${KNOWN_MAJOR}.x`,
    );
  }
  return { wait, prioritized, delayed, jobPrefix: queue.toKey('') };
}

/** The lowest score in `prioritized` of a job whose priority is above `priority`: every job scored below it starts before such a job. */
export const scoreAbovePriority = (priority: number): string => ((BigInt(priority) + 1n) << 32n).toString();

function installedVersion(): string {
  try {
    return String((createRequire(import.meta.url)('bullmq/package.json') as { version?: unknown }).version);
  } catch {
    return 'of an unknown version';
  }
}
