import type { DatabaseSync } from 'node:sqlite';
import type { ArtifactInfo, StoredArtifact } from '../../artifacts/artifact-types.ts';

/** A task's artifacts in SQLite: one row each, its text whole; deleted with its task (ON DELETE CASCADE). */
export interface ArtifactTable {
  /** Keeps `artifact` for task `taskId`; a task no longer kept keeps nothing. */
  save(taskId: string, artifact: StoredArtifact): void;
  load(taskId: string, id: string): StoredArtifact | undefined;
  list(taskId: string): ArtifactInfo[];
}

interface ArtifactRow {
  readonly id: string;
  readonly tool: string;
  readonly bytes: number;
  readonly lines: number;
  readonly tokens: number;
  readonly created_at: string;
}

const infoOf = (row: ArtifactRow): ArtifactInfo => ({ id: row.id, tool: row.tool, bytes: row.bytes, lines: row.lines, tokens: row.tokens, createdAt: row.created_at });

/** The statements of the `artifacts` table (schema version 4). */
export function createArtifactTable(db: DatabaseSync): ArtifactTable {
  // INSERT … SELECT: only for a task the store still keeps, as a log entry of an evicted task goes nowhere.
  const insert = db.prepare(
    'INSERT INTO artifacts (task_id, id, tool, bytes, lines, tokens, created_at, text) SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?)',
  );
  const select = db.prepare('SELECT id, tool, bytes, lines, tokens, created_at, text FROM artifacts WHERE task_id = ? AND id = ?');
  const selectAll = db.prepare('SELECT id, tool, bytes, lines, tokens, created_at FROM artifacts WHERE task_id = ? ORDER BY created_at, rowid');
  return {
    save(taskId, artifact) {
      insert.run(taskId, artifact.id, artifact.tool, artifact.bytes, artifact.lines, artifact.tokens, artifact.createdAt, artifact.text, taskId);
    },
    load(taskId, id) {
      const row = select.get(taskId, id) as (ArtifactRow & { readonly text: string }) | undefined;
      return row === undefined ? undefined : { ...infoOf(row), text: row.text };
    },
    list(taskId) {
      return (selectAll.all(taskId) as unknown as ArtifactRow[]).map(infoOf);
    },
  };
}
