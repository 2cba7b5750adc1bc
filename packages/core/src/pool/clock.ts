/** A timer a {@link PoolClock} started: `unref()`, where it has one, lets the process exit while it waits. */
export interface PoolTimer {
  unref?(): unknown;
}

/**
 * Where the session pool reads the time and starts its timers: every duration and deadline it keeps
 * (call times, idle sessions, the breaker's cooldown, the connect and drain limits, `maxTotalMs`), so a test
 * can move time on by hand instead of waiting for it. Event-loop turns (`setImmediate`) are not time and
 * stay Node's, and so are the timers inside the MCP SDK and generic-pool (`requestMs`, `acquireMs`).
 */
export interface PoolClock {
  /** Milliseconds on a scale that never goes back; only differences are read. */
  now(): number;
  /** Runs `callback` once, `ms` from now. */
  setTimeout(callback: () => void, ms: number): PoolTimer;
  /** Stops a timer that has not run yet; `undefined` or a timer that ran is ignored. */
  clearTimeout(timer: PoolTimer | undefined): void;
}

/** The real time: `performance.now()` and Node's timers, read at each call (so vitest's fake timers reach them too). */
export const realClock: PoolClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};
