/** How the delays between a message's attempts grow. */
export interface RetryDelays {
  /** The delay before the first retry, in milliseconds. */
  readonly retryDelayMs: number;
  /** The longest delay, in milliseconds. */
  readonly maxRetryDelayMs: number;
}

/**
 * The delay after a message's `attempt`-th failed attempt (1 for the first): exponential — `retryDelayMs`
 * doubled for each attempt before, capped at `maxRetryDelayMs` — with jitter that keeps between half of
 * it and all of it, so receivers that failed together are not retried together. `random` is in [0, 1).
 */
export function retryDelay(attempt: number, delays: RetryDelays, random: () => number = Math.random): number {
  // 2^30 is past any cap that fits a timer: the exponent stops there, so the delay never overflows.
  const exponential = Math.min(delays.maxRetryDelayMs, delays.retryDelayMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}
