import { readLogEntry, type StoredLogEntry, type TaskLogData, type TaskLogType } from '../log-entry.ts';
import { logPage, shrinkLogData, type TaskLogPage } from '../task-log.ts';
import type { RedisKeys } from './redis-keys.ts';
import type { RedisScripts, ScriptReply } from './scripts.ts';

/** Bounds of each task's log, as BoundedLog's. */
export interface LogBounds {
  readonly maxBytes: number;
  readonly maxEntryBytes: number;
}

/** Tasks' logs, one Redis stream each. */
export interface LogStreams {
  /** Sends the entry at once on the store's one connection, so whatever is sent after it sees it; never waits. */
  append<Type extends TaskLogType>(id: string, type: Type, data: TaskLogData<Type>): Promise<unknown>;
  read(id: string, after?: number, limit?: number): Promise<TaskLogPage>;
  tail(id: string, count: number): Promise<TaskLogPage>;
}

/** A task's log when it has none, or the task is not kept. */
const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

/**
 * The log side of the Redis store. A stream per task fits a log read by cursor: entry ids are
 * `<seq>-0`, so a page is one XRANGE from the cursor, and the oldest entries go with one XTRIM MINID.
 * The window (`:log-first`, `:log-last`, `:log-bytes`) lives in the task's hash, so `dropped` is
 * `first - 1` as in the SQLite store; the byte bound is BoundedLog's, counted on the very JSON stored.
 */
export function createLogStreams(scripts: RedisScripts, keys: RedisKeys, bounds: LogBounds): LogStreams {
  const { maxBytes, maxEntryBytes } = bounds;

  return {
    append(id, type, data) {
      const { json } = shrinkLogData(data, maxEntryBytes);
      return scripts.klymAppend(keys.task(id), keys.log(id), JSON.stringify(new Date().toISOString()), JSON.stringify(type), json, maxBytes);
    },
    async read(id, after = 0, limit = 50) {
      const from = Number.isFinite(after) ? after : 0;
      return page(await scripts.klymRead(keys.task(id), keys.log(id), 'read', from, redisLimit(limit), 0), from, limit);
    },
    async tail(id, count) {
      const back = Number.isFinite(count) ? count : Number.MAX_SAFE_INTEGER;
      return page(await scripts.klymRead(keys.task(id), keys.log(id), 'tail', 0, redisLimit(count), back), undefined, count);
    },
  };
}

/** The page the read script's `reply` makes: `after` undefined for a tail of `limit` entries. */
function page(reply: ScriptReply, after: number | undefined, limit: number): TaskLogPage {
  if (!Array.isArray(reply)) return EMPTY_PAGE;
  const [first, last, ...entries] = reply as [number, number, ...string[]];
  const from = after ?? Math.max(0, last - limit);
  // `seq` and `time` are the append script's own; `type` and `data` are looked at by readLogEntry.
  const parsed = entries.map((json) => readLogEntry(JSON.parse(json) as StoredLogEntry));
  return logPage(from, limit, parsed, { firstSeq: first, lastSeq: last, dropped: first - 1 });
}

/** `limit` as the read script takes it (-1 for no limit), cut the way `Array.prototype.slice` cuts, so pages match BoundedLog's. */
function redisLimit(limit: number): number {
  if (Number.isNaN(limit) || limit <= 0) return 0;
  return limit === Number.POSITIVE_INFINITY ? -1 : Math.trunc(limit);
}
