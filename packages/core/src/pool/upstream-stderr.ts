import type { Readable } from 'node:stream';
import { createLineSplitter, type LineCounts } from '../internal/line-splitter.ts';
import type { PoolClock } from './clock.ts';
import type { UpstreamLogEntry } from './upstream-session.ts';

/** What a stdio upstream wrote to stderr, over all its sessions: bytes read, lines handed on, bytes dropped. */
export type StderrCounts = LineCounts;

/** Stderr bytes handed on as lines at once, before the rate below applies. */
const BURST_BYTES = 256 * 1024;
/** Stderr bytes handed on as lines per second, once the burst is spent. */
const BYTES_PER_SECOND = 64 * 1024;

/**
 * Reads a stdio server's stderr into log entries at a bounded cost. Bytes are split into lines without
 * building strings of what is dropped (a line past 8 KiB is cut); at most 256 KiB at once, then 64 KiB a
 * second, are handed on as lines: every line handed on becomes a log entry for the pool and the borrower
 * (a task's log keeps 256 KiB in all), so a flood past that is dropped before it costs a string. What is
 * dropped is counted in `counts`, and one warning says so when a flood starts being dropped. The rate is
 * measured on `clock`.
 */
export function readStderr(
  stream: Readable,
  upstream: string,
  log: (entry: UpstreamLogEntry) => void,
  counts: StderrCounts,
  clock: Pick<PoolClock, 'now'>,
): void {
  let budget = BURST_BYTES;
  let refilledAt = clock.now();
  let dropping = false;
  const admit = (bytes: number): boolean => {
    const now = clock.now();
    budget = Math.min(BURST_BYTES, budget + ((now - refilledAt) * BYTES_PER_SECOND) / 1_000);
    refilledAt = now;
    // A flood is over once the budget has filled up again: one warning per flood, not per line let through.
    if (budget === BURST_BYTES) dropping = false;
    if (budget >= bytes) {
      budget -= bytes;
      return true;
    }
    if (!dropping) {
      dropping = true;
      log({
        upstream,
        source: 'stderr',
        level: 'warning',
        message: `Upstream "${upstream}" floods its stderr: lines past ${BURST_BYTES / 1024} KiB at once and ${BYTES_PER_SECOND / 1024} KiB a second are dropped (counted in the pool's status, stderr.droppedBytes)`,
      });
    }
    return false;
  };
  const splitter = createLineSplitter((line) => log({ upstream, source: 'stderr', level: 'info', message: line }), { counts, admit });
  stream.on('data', (chunk: Buffer) => splitter.write(chunk));
  stream.on('end', () => splitter.end());
}
