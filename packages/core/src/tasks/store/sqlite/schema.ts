import type { DatabaseSync } from 'node:sqlite';
import { inTransaction } from './transaction.ts';

/** `PRAGMA application_id` of a Klym task store: "Klym" in ASCII, so a file says whose it is. */
export const KLYM_APPLICATION_ID = 0x4b_6c_79_6d;

/**
 * The task store's schema, one migration per version: `MIGRATIONS[n]` takes a database from version `n`
 * (`PRAGMA user_version`) to `n + 1`. Append to it, never edit an entry: files written by every Klym that
 * shipped one are migrated through it.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: tasks and their bounded logs.
  `
  CREATE TABLE tasks (
    -- Insertion order: ties of created_at, and list cursors. AUTOINCREMENT: never reused after evict.
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    principal TEXT NOT NULL,
    status TEXT NOT NULL,
    -- ISO 8601 in UTC (toISOString), so text order is time order.
    created_at TEXT NOT NULL,
    finished_at TEXT,
    -- The whole TaskRecord as JSON; the columns above repeat what is queried.
    record TEXT NOT NULL,
    -- The log's window: seq of the oldest kept entry, of the newest written, and bytes kept.
    log_first_seq INTEGER NOT NULL DEFAULT 1,
    log_last_seq INTEGER NOT NULL DEFAULT 0,
    log_bytes INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX tasks_by_created ON tasks (created_at, seq);
  CREATE INDEX tasks_by_principal ON tasks (principal, created_at, seq);
  CREATE INDEX tasks_by_status ON tasks (status, created_at, seq);
  CREATE TABLE task_logs (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    time TEXT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    -- Bytes of the entry's JSON, as the log's bound counts them.
    bytes INTEGER NOT NULL,
    PRIMARY KEY (task_id, seq)
  ) WITHOUT ROWID;
  `,
  // 2: idempotency keys and run checkpoints.
  `
  ALTER TABLE tasks ADD COLUMN idempotency_key TEXT;
  CREATE UNIQUE INDEX tasks_by_idempotency_key ON tasks (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE TABLE checkpoints (
    task_id TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    -- The checkpoint without its messages, as JSON.
    state TEXT NOT NULL,
    message_count INTEGER NOT NULL
  ) WITHOUT ROWID;
  -- A checkpoint's messages, one row each: a run's conversation only grows, so a save appends.
  CREATE TABLE checkpoint_messages (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (task_id, idx)
  ) WITHOUT ROWID;
  `,
  // 3: the outbox of webhook messages. No reference to tasks: a message outlives its task's eviction.
  `
  CREATE TABLE webhook_outbox (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    -- Milliseconds since the epoch.
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    -- When it is due; while a claim holds it, when that claim's lease ends.
    next_attempt_at INTEGER NOT NULL,
    -- The token of the claim holding it ('' when none).
    lease TEXT NOT NULL DEFAULT ''
  ) WITHOUT ROWID;
  CREATE INDEX webhook_outbox_by_due ON webhook_outbox (next_attempt_at);
  `,
  // 4: artifacts, tool results kept whole; deleted with their task.
  `
  CREATE TABLE artifacts (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    tool TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (task_id, id)
  );
  `,
  // 5: artifacts kept as records, their original JSON beside them, and what each counts against the caps.
  // Rebuilt rather than altered: an added column goes after \`text\`, and SQLite reaches a column past a big
  // text only by walking its overflow pages, so a list would read every text.
  `
  CREATE TABLE artifacts_v5 (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    tool TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    -- ArtifactRecords as JSON; NULL for an artifact kept as text.
    records TEXT,
    -- Bytes it counts against the caps: its text's, and its original's when kept.
    kept_bytes INTEGER NOT NULL,
    text TEXT NOT NULL,
    -- For records, the result's JSON as the tool gave it.
    original TEXT,
    PRIMARY KEY (task_id, id)
  );
  INSERT INTO artifacts_v5 (rowid, task_id, id, tool, bytes, lines, tokens, created_at, kept_bytes, text)
    SELECT rowid, task_id, id, tool, bytes, lines, tokens, created_at, bytes, text FROM artifacts;
  DROP TABLE artifacts;
  ALTER TABLE artifacts_v5 RENAME TO artifacts;
  -- Covering: a task's bytes, and the store's, are summed without reading a row.
  CREATE INDEX artifacts_by_task ON artifacts (task_id, kept_bytes);
  `,
  // 6: what each principal spent each day (its daily quotas); kept apart from tasks, which are evicted sooner.
  `
  CREATE TABLE spend (
    principal TEXT NOT NULL,
    -- YYYY-MM-DD, the UTC date.
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    usd REAL NOT NULL,
    PRIMARY KEY (principal, day)
  ) WITHOUT ROWID;
  `,
];

/** The schema version this Klym writes: a file of a higher version was written by a newer Klym. */
export const TASK_STORE_SCHEMA_VERSION = MIGRATIONS.length;

/** Reads `PRAGMA user_version`. */
export function schemaVersion(db: DatabaseSync): number {
  return Number((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version);
}

/**
 * Migrates `db` from its version up to `target` in one transaction, and marks it as Klym's. The caller
 * has checked that the file is Klym's (or empty) and not newer than `target`.
 */
export function migrateSchema(db: DatabaseSync, target: number = TASK_STORE_SCHEMA_VERSION): void {
  inTransaction(db, () => {
    const from = schemaVersion(db);
    for (let version = from; version < target; version++) db.exec(MIGRATIONS[version] as string);
    // PRAGMA takes no parameters; both values are integers of ours.
    if (from < target) db.exec(`PRAGMA user_version = ${target}`);
    db.exec(`PRAGMA application_id = ${KLYM_APPLICATION_ID}`);
  });
}
