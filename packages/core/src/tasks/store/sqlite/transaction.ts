import type { DatabaseSync } from 'node:sqlite';

/** Runs `work` in one transaction of `db`: committed when it returns, rolled back when it throws. */
export function inTransaction<T>(db: DatabaseSync, work: () => T): T {
  db.exec('BEGIN');
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    try {
      db.exec('ROLLBACK');
    } catch {
      // SQLite already rolled back by itself (it does on some I/O errors); `error` says why.
    }
    throw error;
  }
}
