import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { KlymError } from '../../../errors.ts';
import { lockStore } from './store-lock.ts';
import { startWalCheckpointer } from './wal-checkpointer.ts';
import { KLYM_APPLICATION_ID, migrateSchema, schemaVersion, TASK_STORE_SCHEMA_VERSION } from './schema.ts';

// SQLite's primary result codes (https://sqlite.org/rescode.html) that start-up explains.
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_READONLY = 8;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

/** The task store's database, open for this process alone. */
export interface TaskDatabase {
  readonly db: DatabaseSync;
  /** Stops the WAL checkpointer, closes the database (SQLite folds the WAL into the file), then releases the lock. */
  close(): Promise<void>;
}

/**
 * Opens the task store's file at `path` for this process alone: creates its directory, takes the lock
 * beside it that the OS releases when the process dies (`<path>.lock`), checks the file is Klym's (or
 * empty), switches it to WAL with `synchronous=NORMAL`, migrates its schema, and starts checkpointing the
 * WAL on a worker thread. Every failure is one `STORE_UNAVAILABLE` line naming the file and why; nothing
 * is left open after one.
 */
export async function openTaskDatabase(path: string): Promise<TaskDatabase> {
  const fail = (reason: string, cause?: unknown): KlymError =>
    new KlymError('STORE_UNAVAILABLE', `Cannot open the task store ${path}: ${reason}`, cause === undefined ? {} : { cause });

  const directory = dirname(path);
  try {
    await mkdir(directory, { recursive: true });
  } catch (error) {
    throw fail(`its directory ${directory} cannot be created (${describe(error)})`, error);
  }
  // SQLite's own answer for a directory is only "unable to open database file".
  if ((await stat(path).catch(() => undefined))?.isDirectory() === true) throw fail('it is a directory, not a file');

  let lock: DatabaseSync | undefined;
  try {
    lock = lockStore(path);
  } catch (error) {
    throw fail(`its lock file ${path}.lock cannot be used (${explain(error)})`, error);
  }
  if (lock === undefined) throw fail(LOCKED);
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path, { enableForeignKeyConstraints: true });
  } catch (error) {
    lock.close();
    throw fail(explain(error), error);
  }
  try {
    db.exec('PRAGMA busy_timeout = 1000');
    checkOwnership(db, fail);
    // Only now that the file is known to be Klym's (or empty) may it be changed.
    const mode = (db.prepare('PRAGMA journal_mode = WAL').get() as { journal_mode: string }).journal_mode;
    if (mode !== 'wal') throw fail(`it cannot use write-ahead logging (journal_mode stays ${mode})`);
    // A commit is a write to the WAL without fsync: it survives the process dying, not the machine.
    // Checkpoints (with their fsync) run on the worker below, never inside a commit on the event loop.
    db.exec('PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 16777216');
    migrateSchema(db);
  } catch (error) {
    db.close();
    lock.close();
    throw error instanceof KlymError ? error : fail(explain(error), error);
  }
  const opened = db;
  const held = lock;
  // Should the worker not run, SQLite's own checkpoints keep the WAL bounded (on the event loop, as before).
  const checkpointer = startWalCheckpointer(path, () => {
    if (opened.isOpen) opened.exec('PRAGMA wal_autocheckpoint = 1000');
  });
  let closing: Promise<void> | undefined;
  return {
    db,
    close: () =>
      (closing ??= (async () => {
        try {
          await checkpointer.stop();
          opened.close();
        } finally {
          held.close();
        }
      })()),
  };
}

const LOCKED = 'it is locked by another Klym process (or by another task store in this process); a task store file serves one Klym at a time';

function checkOwnership(db: DatabaseSync, fail: (reason: string) => KlymError): void {
  const applicationId = Number((db.prepare('PRAGMA application_id').get() as { application_id: number }).application_id);
  if (applicationId === KLYM_APPLICATION_ID) {
    const version = schemaVersion(db);
    if (version > TASK_STORE_SCHEMA_VERSION) {
      throw fail(`it was written by a newer Klym, schema version ${version}; this Klym knows up to ${TASK_STORE_SCHEMA_VERSION}`);
    }
    return;
  }
  const objects = Number((db.prepare('SELECT count(*) AS count FROM sqlite_schema').get() as { count: number }).count);
  if (applicationId !== 0) {
    throw fail(`it is not a Klym database (a SQLite database of another application, application_id 0x${(applicationId >>> 0).toString(16)})`);
  }
  if (objects > 0) throw fail(`it is not a Klym database (a SQLite database of another application: ${objects} schema objects and no Klym application_id)`);
}

/** One line on why SQLite refused the file. */
function explain(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'errcode' in error ? Number(error.errcode) & 0xff : undefined;
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return LOCKED;
    case SQLITE_NOTADB:
      return 'it is not a Klym database (not a SQLite file at all)';
    case SQLITE_READONLY:
      return `it is read-only (${describe(error)})`;
    case SQLITE_CANTOPEN:
      return `it cannot be opened or created (${describe(error)})`;
    default:
      return describe(error);
  }
}

function describe(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.replaceAll(/\s*\n\s*/g, ' ');
}
