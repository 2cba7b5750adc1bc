import { TASK_DEFAULTS } from '../../defaults.ts';
import type { TaskLogData, TaskLogEntry, TaskLogType } from './log-entry.ts';

/** A page of a task's log. */
export interface TaskLogPage {
  readonly entries: readonly TaskLogEntry[];
  /** Pass as `after` to read on; the `seq` of the last entry returned (or `after` when none). */
  readonly nextCursor: number;
  /** The `seq` of the newest entry written so far (0 when none). */
  readonly lastSeq: number;
  /** Entries dropped from the front to stay within the byte bound, over the task's life. */
  readonly dropped: number;
  /** Set when the page starts after a gap: entries between `after` and the first returned one were dropped. */
  readonly droppedBefore?: { readonly fromSeq: number; readonly toSeq: number };
  /** Whether newer entries remain after this page. */
  readonly more: boolean;
}

/** Options of {@link BoundedLog}. */
export interface BoundedLogOptions {
  /** Bytes (of the entries' JSON) the log holds; older entries are dropped past it. @default 262_144 */
  readonly maxBytes?: number;
  /** Bytes one entry may take; longer strings inside it are cut. @default 4_096 */
  readonly maxEntryBytes?: number;
}

/**
 * A task's log: numbered entries in a buffer bounded in bytes. When a new entry would pass the bound,
 * the oldest are dropped and counted, so a task that floods its log costs bounded memory.
 */
export class BoundedLog {
  readonly #maxBytes: number;
  readonly #maxEntryBytes: number;
  readonly #entries: { entry: TaskLogEntry; bytes: number }[] = [];
  #head = 0;
  #bytes = 0;
  #lastSeq = 0;
  #dropped = 0;

  constructor(options: BoundedLogOptions = {}) {
    this.#maxBytes = options.maxBytes ?? TASK_DEFAULTS.logMaxBytes;
    this.#maxEntryBytes = options.maxEntryBytes ?? TASK_DEFAULTS.logMaxEntryBytes;
  }

  /** Appends an entry and returns it with its `seq`. */
  append<Type extends TaskLogType>(type: Type, data: TaskLogData<Type>, time: Date = new Date()): TaskLogEntry {
    const shrunk = shrinkLogData(data, this.#maxEntryBytes);
    // What `type` was written with, cut as `Logged` says.
    const entry = { seq: ++this.#lastSeq, time: time.toISOString(), type, data: shrunk.data } as TaskLogEntry;
    const bytes = logEntryBytes(entry.seq, entry.time, type, shrunk.bytes);
    this.#entries.push({ entry, bytes });
    this.#bytes += bytes;
    while (this.#bytes > this.#maxBytes && this.#entries.length - this.#head > 1) {
      const oldest = this.#entries[this.#head++] as { bytes: number };
      this.#bytes -= oldest.bytes;
      this.#dropped++;
    }
    // Compact the array once the dropped prefix is large, so memory follows the live entries.
    if (this.#head > 1_024 && this.#head * 2 > this.#entries.length) {
      this.#entries.splice(0, this.#head);
      this.#head = 0;
    }
    return entry;
  }

  /** Entries with `seq > after` (oldest first), at most `limit`. */
  read(after = 0, limit = 50): TaskLogPage {
    const live = this.#entries.length - this.#head;
    const firstSeq = live === 0 ? this.#lastSeq + 1 : (this.#entries[this.#head] as { entry: TaskLogEntry }).entry.seq;
    const from = this.#head + (Math.max(after + 1, firstSeq) - firstSeq);
    const entries = this.#entries.slice(from, from + Math.max(0, limit)).map((item) => item.entry);
    return logPage(after, limit, entries, { firstSeq, lastSeq: this.#lastSeq, dropped: this.#dropped });
  }

  /** The newest `count` entries, oldest first. */
  tail(count: number): TaskLogPage {
    return this.read(Math.max(0, this.#lastSeq - count), count);
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }
}

/** Where a log stands when a page of it is read: what {@link logPage} needs besides the entries. */
export interface LogWindow {
  /** The `seq` of the oldest entry kept (`lastSeq + 1` when the log has none). */
  readonly firstSeq: number;
  /** The `seq` of the newest entry written (0 when none). */
  readonly lastSeq: number;
  /** Entries dropped over the log's life. */
  readonly dropped: number;
}

/**
 * The page of a log that starts after `after` and holds at most `limit` entries. `entries` are the kept
 * entries with `seq > after`, oldest first (those past `limit` are ignored). Every task store pages its
 * logs through this, so cursors, gaps and `more` mean the same whatever holds the entries.
 */
export function logPage(after: number, limit: number, entries: readonly TaskLogEntry[], window: LogWindow): TaskLogPage {
  const { firstSeq, lastSeq, dropped } = window;
  const start = Math.max(after + 1, firstSeq);
  const page = entries.slice(0, Math.max(0, limit));
  const last = page.at(-1);
  return {
    entries: page,
    nextCursor: last === undefined ? Math.max(after, Math.min(lastSeq, start - 1)) : last.seq,
    lastSeq,
    dropped,
    ...(after + 1 < firstSeq && firstSeq > 1 ? { droppedBefore: { fromSeq: after + 1, toSeq: firstSeq - 1 } } : {}),
    more: (last?.seq ?? start - 1) < lastSeq,
  };
}

/**
 * The JSON of a log entry, built from its data's JSON: exactly `JSON.stringify(entry)`, whose UTF-8 length
 * is what an entry counts against a log's byte bound.
 */
export function logEntryJson(seq: number, time: string, type: string, dataJson: string): string {
  return `{"seq":${seq},"time":${JSON.stringify(time)},"type":${JSON.stringify(type)},"data":${dataJson}}`;
}

/**
 * The UTF-8 length of {@link logEntryJson}, from its data's length: what the data's JSON already measured is
 * not built into a second, longer string only to be measured again.
 */
export function logEntryBytes(seq: number, time: string, type: string, dataBytes: number): number {
  return Buffer.byteLength(logEntryJson(seq, time, type, '')) + dataBytes;
}

/**
 * Cuts strings (deeply) so the JSON of `data` fits in about `maxBytes`; resolves the data kept, its JSON
 * and that JSON's UTF-8 length.
 */
export function shrinkLogData(data: object, maxBytes: number): { readonly data: object; readonly json: string; readonly bytes: number } {
  // `?? '{}'`: an object whose toJSON answers undefined still takes the place of an object.
  const json = JSON.stringify(data) ?? '{}';
  const bytes = Buffer.byteLength(json);
  if (bytes <= maxBytes) return { data, json, bytes };
  let limit = Math.max(32, Math.floor(maxBytes / 2));
  for (;;) {
    const cut = cutStrings(data, limit) as object;
    const cutJson = JSON.stringify(cut);
    const cutBytes = Buffer.byteLength(cutJson);
    if (cutBytes <= maxBytes || limit <= 32) return { data: cut, json: cutJson, bytes: cutBytes };
    limit = Math.floor(limit / 2);
  }
}

function cutStrings(value: unknown, limit: number, depth = 0): unknown {
  if (typeof value === 'string') return value.length > limit ? `${value.slice(0, limit)}…` : value;
  if (depth > 6) return '…';
  if (Array.isArray(value)) {
    const items = value.slice(0, 20).map((item) => cutStrings(item, limit, depth + 1));
    return value.length > 20 ? [...items, `… ${value.length - 20} more`] : items;
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, cutStrings(item, limit, depth + 1)]));
  }
  return value;
}
