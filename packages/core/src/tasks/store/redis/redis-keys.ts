import type { TaskFilter } from '../task-types.ts';

/**
 * The names of the store's keys, all under one prefix. The Lua scripts build the index names the same
 * way (`status:`, `principal:`, `principal-status:`, `finished`, `write-back-pending`, `artifacts:`,
 * `artifact-bytes`, `finished-artifacts`), from the prefix they are given, since which indexes a change
 * touches is only known inside the script.
 */
export interface RedisKeys {
  readonly prefix: string;
  /** Counts tasks as they are inserted: the tie-break of two created in the same millisecond. */
  readonly sequence: string;
  /** HASH: one field per top-level record key, holding its JSON; `:`-fields are the store's own. */
  task(id: string): string;
  /** STREAM: the task's log, entry ids `<seq>-0`. */
  log(id: string): string;
  /** HASH: the checkpoint without its messages (`state`), their count and the save's `version`. */
  checkpoint(id: string): string;
  /** LIST: the checkpoint's messages, one JSON each. */
  messages(id: string): string;
  /**
   * HASH: the task's artifacts, `<artifact>:info` (JSON), `<artifact>:text` and, for records,
   * `<artifact>:original` each; `:bytes`, what they count against the caps.
   */
  artifacts(id: string): string;
  /** STRING: what every task's artifacts count against the store's cap, in bytes. */
  readonly artifactBytes: string;
  /** ZSET: the finished tasks holding artifacts, scored by finish time (ms): whose artifacts the store's cap drops first. */
  readonly finishedArtifacts: string;
  /** HASH: what each principal spent on `day`, `<principal>:tokens` and `<principal>:usd` as JSON-named fields; expires after a month. */
  spend(day: string): string;
  /** What follows `idempotency:` in the key of `principal`'s `key`: both, unambiguously. */
  idempotencySuffix(principal: string, key: string): string;
  idempotency(suffix: string): string;
  /** The sorted set that lists the tasks matching `filter`. */
  index(filter: TaskFilter): string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    prefix,
    sequence: `${prefix}sequence`,
    task: (id) => `${prefix}task:${id}`,
    log: (id) => `${prefix}log:${id}`,
    checkpoint: (id) => `${prefix}checkpoint:${id}`,
    messages: (id) => `${prefix}messages:${id}`,
    artifacts: (id) => `${prefix}artifacts:${id}`,
    artifactBytes: `${prefix}artifact-bytes`,
    finishedArtifacts: `${prefix}finished-artifacts`,
    spend: (day) => `${prefix}spend:${day}`,
    idempotencySuffix: (principal, key) => JSON.stringify([principal, key]),
    idempotency: (suffix) => `${prefix}idempotency:${suffix}`,
    index({ principal, status }) {
      if (principal !== undefined && status !== undefined) return `${prefix}principal-status:${status}:${principal}`;
      if (principal !== undefined) return `${prefix}principal:${principal}`;
      if (status !== undefined) return `${prefix}status:${status}`;
      return `${prefix}tasks`;
    },
  };
}
