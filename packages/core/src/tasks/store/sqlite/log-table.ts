import type { DatabaseSync } from 'node:sqlite';
import { readLogEntry, type TaskLogData, type TaskLogType } from '../log-entry.ts';
import { logEntryJson, logPage, shrinkLogData, type TaskLogPage } from '../task-log.ts';
import { inTransaction } from './transaction.ts';

/** Bounds and batching of {@link createLogTable}. */
export interface LogTableOptions {
  readonly maxBytes: number;
  readonly maxEntryBytes: number;
  /** Buffered entries that are written at once, without waiting for the next tick. */
  readonly batchEntries: number;
}

/** Tasks' bounded logs in the `task_logs` table, appended through a buffer written once per tick. */
export interface LogTable {
  /** Buffers an entry; it is written on the next tick, or at once when `batchEntries` are buffered. */
  append<Type extends TaskLogType>(id: string, type: Type, data: TaskLogData<Type>): void;
  /**
   * Writes the buffered entries, and then runs `work`, in one transaction. When it fails nothing is
   * written and the entries stay buffered.
   */
  flush<T>(work?: () => T): T | undefined;
  read(id: string, after?: number, limit?: number): TaskLogPage;
  tail(id: string, count: number): TaskLogPage;
  /** Cancels the pending tick's write (the entries stay buffered for a last `flush`). */
  stop(): void;
}

/** A task's log when it has none, or the task is not kept. */
const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

interface Pending {
  readonly id: string;
  readonly time: string;
  readonly type: string;
  /** The entry's data as JSON, already cut to `maxEntryBytes`: buffered as text, so later changes to it do not show. */
  readonly json: string;
}

interface Window {
  readonly firstSeq: number;
  readonly lastSeq: number;
  readonly bytes: number;
}

/**
 * The log side of the SQLite task store. Each task's row keeps its log's window (`log_first_seq`,
 * `log_last_seq`, `log_bytes`); entries are dropped from the front exactly as {@link BoundedLog} drops
 * them, so `dropped` is always `log_first_seq - 1`.
 */
export function createLogTable(db: DatabaseSync, options: LogTableOptions): LogTable {
  const { maxBytes, maxEntryBytes, batchEntries } = options;
  const selectWindow = db.prepare('SELECT log_first_seq AS firstSeq, log_last_seq AS lastSeq, log_bytes AS bytes FROM tasks WHERE id = ?');
  const updateWindow = db.prepare('UPDATE tasks SET log_first_seq = ?, log_last_seq = ?, log_bytes = ? WHERE id = ?');
  const insertEntry = db.prepare('INSERT INTO task_logs (task_id, seq, time, type, data, bytes) VALUES (?, ?, ?, ?, ?, ?)');
  const selectSizes = db.prepare('SELECT seq, bytes FROM task_logs WHERE task_id = ? ORDER BY seq');
  const deleteBefore = db.prepare('DELETE FROM task_logs WHERE task_id = ? AND seq < ?');
  const selectEntries = db.prepare('SELECT seq, time, type, data FROM task_logs WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?');

  let buffer: Pending[] = [];
  let tick: NodeJS.Immediate | undefined;

  const writeTask = (id: string, pending: readonly Pending[]): void => {
    const window = selectWindow.get(id) as Window | undefined;
    // Not kept (never inserted, or evicted): a late entry goes nowhere, as in the in-memory store.
    if (window === undefined) return;
    let lastSeq = window.lastSeq;
    const rows = pending.map((entry) => {
      const seq = ++lastSeq;
      return { seq, entry, bytes: Buffer.byteLength(logEntryJson(seq, entry.time, entry.type, entry.json)) };
    });
    // BoundedLog's rule over a batch: keep the longest run of newest entries within maxBytes, and never
    // fewer than the newest one. Entries of the batch that fall outside are never written.
    let keepFrom = rows.length - 1;
    let batchBytes = (rows[keepFrom] as { bytes: number }).bytes;
    while (keepFrom > 0 && batchBytes + (rows[keepFrom - 1] as { bytes: number }).bytes <= maxBytes)
      batchBytes += (rows[--keepFrom] as { bytes: number }).bytes;
    let firstSeq = window.firstSeq;
    let bytes = window.bytes + batchBytes;
    if (keepFrom > 0) {
      firstSeq = (rows[keepFrom] as { seq: number }).seq;
      bytes = batchBytes;
      deleteBefore.run(id, firstSeq);
    } else if (bytes > maxBytes) {
      const drop: { seq: number; bytes: number }[] = [];
      for (const row of selectSizes.iterate(id) as Iterable<{ seq: number; bytes: number }>) {
        if (bytes <= maxBytes) break;
        drop.push(row);
        bytes -= row.bytes;
      }
      // Seqs are contiguous, so dropping every kept entry moves the window to the batch's first.
      firstSeq = (drop.at(-1)?.seq ?? firstSeq - 1) + 1;
      deleteBefore.run(id, firstSeq);
    }
    for (const row of rows.slice(keepFrom)) insertEntry.run(id, row.seq, row.entry.time, row.entry.type, row.entry.json, row.bytes);
    updateWindow.run(firstSeq, lastSeq, bytes, id);
  };

  const flush = <T>(work?: () => T): T | undefined => {
    if (tick !== undefined) clearImmediate(tick);
    tick = undefined;
    if (buffer.length === 0 && work === undefined) return undefined;
    const taken = buffer;
    buffer = [];
    try {
      return inTransaction(db, () => {
        for (const [id, pending] of Map.groupBy(taken, (entry) => entry.id)) writeTask(id, pending);
        return work?.();
      });
    } catch (error) {
      buffer = [...taken, ...buffer];
      throw error;
    }
  };

  const flushOnTick = (): void => {
    try {
      flush();
    } catch {
      // The entries stay buffered; the next read, save or close writes them again and reports the failure.
    }
  };

  const read = (id: string, after = 0, limit = 50): TaskLogPage => {
    const window = selectWindow.get(id) as Window | undefined;
    if (window === undefined) return EMPTY_PAGE;
    const rows = selectEntries.all(id, after, sqlLimit(limit)) as { seq: number; time: string; type: string; data: string }[];
    const entries = rows.map((row) => readLogEntry({ seq: row.seq, time: row.time, type: row.type, data: JSON.parse(row.data) }));
    return logPage(after, limit, entries, { firstSeq: window.firstSeq, lastSeq: window.lastSeq, dropped: window.firstSeq - 1 });
  };

  return {
    append(id, type, data) {
      buffer.push({ id, time: new Date().toISOString(), type, json: shrinkLogData(data, maxEntryBytes).json });
      // A multiple rather than `>=`: while the disk fails, a write is tried once per batch, not per entry.
      if (buffer.length % batchEntries === 0) flushOnTick();
      else tick ??= setImmediate(flushOnTick);
    },
    flush,
    read,
    tail(id, count) {
      const window = selectWindow.get(id) as Window | undefined;
      return window === undefined ? EMPTY_PAGE : read(id, Math.max(0, window.lastSeq - count), count);
    },
    stop() {
      if (tick !== undefined) clearImmediate(tick);
      tick = undefined;
    },
  };
}

/** `limit` as SQLite's LIMIT takes it, cut the way `Array.prototype.slice` cuts (so pages match BoundedLog's). */
function sqlLimit(limit: number): number {
  if (Number.isNaN(limit) || limit <= 0) return 0;
  return limit === Number.POSITIVE_INFINITY ? -1 : Math.trunc(limit);
}
