import type { SessionPoolOptions } from '@klym/core';

type PoolClock = NonNullable<SessionPoolOptions['clock']>;

/** A pool clock that moves only when the test moves it. */
export interface ManualClock extends PoolClock {
  /** Moves time on by `ms`, running each timer that falls due on the way, soonest first (ties in the order they were set). */
  advance(ms: number): void;
  /** The timers still waiting, as the milliseconds until each is due, soonest first. */
  pending(): number[];
}

interface Timer extends ReturnType<PoolClock['setTimeout']> {
  readonly due: number;
  readonly order: number;
  readonly callback: () => void;
}

/**
 * A clock for `createSessionPool({ clock })` on which nothing happens until `advance()`: a time limit, a
 * cooldown or an idle threshold is reached when the test says so, and a test asserts exact durations and
 * the timers the pool keeps instead of sleeping and hoping. Starts at 0.
 */
export function createManualClock(): ManualClock {
  let now = 0;
  let set = 0;
  const timers = new Set<Timer>();
  const soonest = (): Timer | undefined => [...timers].toSorted((a, b) => a.due - b.due || a.order - b.order)[0];
  return {
    now: () => now,
    setTimeout(callback, ms) {
      const timer: Timer = { due: now + Math.max(0, ms), order: set++, callback };
      timers.add(timer);
      return timer;
    },
    clearTimeout(timer) {
      timers.delete(timer as Timer);
    },
    advance(ms) {
      const until = now + ms;
      for (let next = soonest(); next !== undefined && next.due <= until; next = soonest()) {
        timers.delete(next);
        now = next.due;
        next.callback();
      }
      now = until;
    },
    pending: () => [...timers].map((timer) => timer.due - now).toSorted((a, b) => a - b),
  };
}
