import type { DatabaseSync } from 'node:sqlite';
import { keptBytes, storeLimitError, taskLimitError, tasksToEvict, type EvictableArtifacts } from '../../../artifacts/artifact-limit.ts';
import type { ArtifactInfo, ArtifactRecords, StoredArtifact } from '../../../artifacts/artifact-types.ts';
import { TERMINAL_STATUSES } from '../task-types.ts';
import { inTransaction } from './transaction.ts';

/** A task's artifacts in SQLite: one row each, its text and original whole; deleted with its task (ON DELETE CASCADE). */
export interface ArtifactTable {
  /**
   * Keeps `artifact` for task `taskId` under the caps, in one transaction: past `maxBytes`, the artifacts of
   * the tasks that finished first are deleted first. A task no longer kept keeps nothing.
   * @throws {KlymError} `ARTIFACT_LIMIT` when a cap would be passed
   */
  save(taskId: string, artifact: StoredArtifact, limits: { readonly maxBytesPerTask: number; readonly maxBytes: number }): void;
  load(taskId: string, id: string): StoredArtifact | undefined;
  /** Bytes `start` to `end` of its text (`substr` of the column as a BLOB: only they come back). */
  loadRange(taskId: string, id: string, start: number, end: number): Uint8Array | undefined;
  list(taskId: string): ArtifactInfo[];
  /** Bytes every task's artifacts count against the caps. */
  bytes(): number;
}

interface ArtifactRow {
  readonly id: string;
  readonly tool: string;
  readonly bytes: number;
  readonly lines: number;
  readonly tokens: number;
  readonly created_at: string;
  readonly records: string | null;
}

const infoOf = (row: ArtifactRow): ArtifactInfo => ({
  id: row.id,
  tool: row.tool,
  bytes: row.bytes,
  lines: row.lines,
  tokens: row.tokens,
  createdAt: row.created_at,
  ...shapeOf(row.records),
});

/**
 * The `records` column: an artifact's records as JSON, or `{"json":"document"}` for a JSON document that is
 * not records (the column says how its text reads, so a new column, after `text`, is not needed).
 */
function shapeOf(records: string | null): Pick<ArtifactInfo, 'records' | 'json'> {
  if (records === null) return {};
  const parsed = JSON.parse(records) as ArtifactRecords | { readonly json: 'document' };
  return 'json' in parsed ? { json: parsed.json } : { records: parsed };
}

// The columns of a list, all before `text`: listing never reads a text's pages.
const INFO_COLUMNS = 'id, tool, bytes, lines, tokens, created_at, records';

const sum = (row: unknown): number => Number((row as { bytes: number }).bytes);

/** The statements of the `artifacts` table (schema version 5). */
export function createArtifactTable(db: DatabaseSync): ArtifactTable {
  const insert = db.prepare(
    'INSERT INTO artifacts (task_id, id, tool, bytes, lines, tokens, created_at, records, kept_bytes, text, original) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const taskExists = db.prepare('SELECT 1 FROM tasks WHERE id = ?');
  // Both through the covering index artifacts_by_task.
  const taskBytes = db.prepare('SELECT coalesce(sum(kept_bytes), 0) AS bytes FROM artifacts WHERE task_id = ?');
  const allBytes = db.prepare('SELECT coalesce(sum(kept_bytes), 0) AS bytes FROM artifacts');
  // The finished tasks holding artifacts but the one saving, finished first first: what the store's cap drops.
  const finishedHolding = db.prepare(
    `SELECT a.task_id AS taskId, sum(a.kept_bytes) AS bytes FROM artifacts a JOIN tasks t ON t.id = a.task_id
     WHERE t.status IN (${TERMINAL_STATUSES.map((status) => `'${status}'`).join(', ')}) AND t.finished_at IS NOT NULL AND a.task_id != ?
     GROUP BY a.task_id ORDER BY t.finished_at, t.seq`,
  );
  const deleteOfTask = db.prepare('DELETE FROM artifacts WHERE task_id = ?');
  const select = db.prepare(`SELECT ${INFO_COLUMNS}, text, original FROM artifacts WHERE task_id = ? AND id = ?`);
  // As a BLOB, `substr` counts bytes; on TEXT it would count code points, which a JS string does not.
  const selectRange = db.prepare('SELECT substr(CAST(text AS BLOB), ?, ?) AS part FROM artifacts WHERE task_id = ? AND id = ?');
  const selectAll = db.prepare(`SELECT ${INFO_COLUMNS} FROM artifacts WHERE task_id = ? ORDER BY created_at, rowid`);

  return {
    save(taskId, artifact, { maxBytesPerTask, maxBytes }) {
      inTransaction(db, () => {
        // Only for a task the store still keeps, as a log entry of an evicted task goes nowhere.
        if (taskExists.get(taskId) === undefined) return;
        const bytes = keptBytes(artifact);
        const kept = sum(taskBytes.get(taskId));
        if (kept + bytes > maxBytesPerTask) throw taskLimitError(artifact, maxBytesPerTask, kept);
        const used = sum(allBytes.get());
        if (used + bytes > maxBytes) {
          const finished = (finishedHolding.all(taskId) as unknown as EvictableArtifacts[]).map((row) => ({ taskId: row.taskId, bytes: Number(row.bytes) }));
          const evicted = tasksToEvict(finished, used, bytes, maxBytes);
          if (evicted === undefined)
            throw storeLimitError(
              artifact,
              maxBytes,
              used,
              finished.reduce((total, task) => total + task.bytes, 0),
            );
          for (const id of evicted) deleteOfTask.run(id);
        }
        const { records, json, original } = artifact;
        insert.run(
          taskId,
          artifact.id,
          artifact.tool,
          artifact.bytes,
          artifact.lines,
          artifact.tokens,
          artifact.createdAt,
          records === undefined ? (json === undefined ? null : JSON.stringify({ json })) : JSON.stringify(records),
          bytes,
          artifact.text,
          original ?? null,
        );
      });
    },
    load(taskId, id) {
      const row = select.get(taskId, id) as (ArtifactRow & { readonly text: string; readonly original: string | null }) | undefined;
      if (row === undefined) return undefined;
      return { ...infoOf(row), text: row.text, ...(row.original === null ? {} : { original: row.original }) };
    },
    loadRange(taskId, id, start, end) {
      const from = Math.max(0, Math.floor(start));
      const row = selectRange.get(from + 1, Math.max(0, Math.floor(end) - from), taskId, id) as { readonly part: Uint8Array | null } | undefined;
      if (row === undefined) return undefined;
      return row.part ?? new Uint8Array(0);
    },
    list(taskId) {
      return (selectAll.all(taskId) as unknown as ArtifactRow[]).map(infoOf);
    },
    bytes() {
      return sum(allBytes.get());
    },
  };
}
