import type { UpstreamStatus } from './upstream-status.ts';

/**
 * An upstream's tool calls as `status().calls` counts them: started, ended well or not, and the time the
 * ended ones took (waiting for a session included). Listings are not counted. Internal to the session pool.
 */
export class CallCounts {
  #started = 0;
  #succeeded = 0;
  #failed = 0;
  #totalMs = 0;

  /** A call began. */
  start(): void {
    this.#started++;
  }

  /** A call that began got its answer. */
  succeed(): void {
    this.#succeeded++;
  }

  /** A call that began failed (the pool refused it, or it failed under way). */
  fail(): void {
    this.#failed++;
  }

  /** A call that had begun to run ended, `ms` after it began. */
  end(ms: number): void {
    this.#totalMs += ms;
  }

  /** What `status()` shows, with the calls in flight now. */
  status(inFlight: number): UpstreamStatus['calls'] {
    return { started: this.#started, succeeded: this.#succeeded, failed: this.#failed, totalMs: this.#totalMs, inFlight };
  }
}
