import { Worker } from 'node:worker_threads';

/** How often the worker folds the WAL back into the database file. */
const INTERVAL_MS = 250;

// The worker's own connection checkpoints while the main thread goes on writing: a PASSIVE checkpoint
// never blocks readers or writers, and its page copying and fsync happen off the event loop.
const WORKER_SOURCE = `
const { DatabaseSync } = require('node:sqlite');
const { parentPort, workerData } = require('node:worker_threads');
const db = new DatabaseSync(workerData.path);
db.exec('PRAGMA busy_timeout = 5000');
const checkpoint = (mode) => { try { db.exec('PRAGMA wal_checkpoint(' + mode + ')'); } catch {} };
const timer = setInterval(() => checkpoint('PASSIVE'), workerData.intervalMs);
parentPort.on('message', (message) => {
  if (message !== 'close') return;
  clearInterval(timer);
  checkpoint('PASSIVE');
  db.close();
  parentPort.close();
});
`;

/** A thread that checkpoints a WAL database; stopping it runs a last checkpoint. */
export interface WalCheckpointer {
  stop(): Promise<void>;
}

/**
 * Starts checkpointing the database at `path` on a worker thread, so that no commit on the main thread pays
 * for one (SQLite's automatic checkpoint runs inside a commit: 3-7 ms of page copying and fsync on the
 * event loop every thousand pages). If the worker cannot run, `onFailure` is told (the caller then turns
 * automatic checkpoints back on). The worker never keeps the process alive.
 */
export function startWalCheckpointer(path: string, onFailure: () => void): WalCheckpointer {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, intervalMs: INTERVAL_MS } });
  worker.unref();
  let stopping = false;
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.once('error', () => onFailure());
  void exited.then(() => {
    if (!stopping) onFailure();
  });
  return {
    async stop() {
      if (!stopping) {
        stopping = true;
        // Held now, so the process waits for the last checkpoint instead of exiting under it.
        worker.ref();
        // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
        worker.postMessage('close');
      }
      await exited;
    },
  };
}
