import { DatabaseSync } from 'node:sqlite';

/**
 * Takes the lock that makes a task store file one Klym process's at a time: an exclusive SQLite lock on a
 * small file beside it (`<path>.lock`), held until the returned connection closes or the process dies,
 * taking its OS lock with it (so a SIGKILLed Klym never leaves a stale lock). The database itself stays in
 * normal locking mode, so that a worker thread can checkpoint its WAL.
 *
 * @returns the lock's connection (close it to release), or `undefined` when another process holds it.
 */
export function lockStore(path: string): DatabaseSync | undefined {
  const lock = new DatabaseSync(`${path}.lock`);
  try {
    // With no busy timeout a second opener fails at once. In EXCLUSIVE locking mode the lock a write
    // takes is kept until the connection closes; the write is the holder's pid, for whoever looks.
    // The journal in memory: the lock file is all there is beside the database (no <path>.lock-journal).
    lock.exec('PRAGMA busy_timeout = 0; PRAGMA journal_mode = MEMORY; PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE');
    lock.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER, since TEXT); DELETE FROM holder');
    lock.prepare('INSERT INTO holder VALUES (?, ?)').run(process.pid, new Date().toISOString());
    lock.exec('COMMIT');
    return lock;
  } catch (error) {
    lock.close();
    if (isBusy(error)) return undefined;
    throw error;
  }
}

const isBusy = (error: unknown): boolean => typeof error === 'object' && error !== null && 'errcode' in error && [5, 6].includes(Number(error.errcode) & 0xff);
