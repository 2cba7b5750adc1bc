/** Options of a {@link CircuitBreaker}. */
export interface CircuitBreakerOptions {
  /** Consecutive connect failures that open the circuit (an upstream's `breaker.failureThreshold`: UPSTREAM_DEFAULTS.failureThreshold, 3). */
  readonly failureThreshold: number;
  /** Wait before the first half-open probe; doubles after each failed probe (`breaker.cooldownMs`: UPSTREAM_DEFAULTS.cooldownMs, 1_000). */
  readonly cooldownMs: number;
  /** Longest wait between probes (`breaker.maxCooldownMs`: UPSTREAM_DEFAULTS.maxCooldownMs, 10_000). */
  readonly maxCooldownMs: number;
}

/** What `status()` shows of a breaker. */
export interface CircuitBreakerStatus {
  /** `closed`: connects are tried; `open`: refused until the next probe; `half-open`: one probe is under way. */
  readonly state: 'closed' | 'open' | 'half-open';
  readonly consecutiveFailures: number;
  /** When the next probe may run (ISO 8601), while open. */
  readonly nextProbeAt: string | undefined;
  readonly opens: number;
}

/**
 * A per-upstream circuit breaker over connect attempts: after `failureThreshold` consecutive failures it
 * opens and refuses attempts, so a dead upstream costs one connect per cooldown instead of a storm;
 * when the cooldown has passed, one attempt is let through (half-open): success closes the circuit,
 * failure opens it again for twice as long. A connect is reported twice: `connected()` when it opens
 * (the circuit closes, so calls may use it), `success()` once the session proved it stays up; a session
 * that dies in between is a `failure()`, and the count and the cooldown carry on from before it, so a
 * server that answers `initialize` and exits is backed off like one that refuses connects. Time comes
 * from `now` (milliseconds on any scale that never goes back; the pool gives its clock's), so tests need no
 * real waiting.
 */
export class CircuitBreaker {
  readonly #options: CircuitBreakerOptions;
  readonly #now: () => number;
  #state: CircuitBreakerStatus['state'] = 'closed';
  #failures = 0;
  #cooldownMs: number;
  #nextProbeAt = 0;
  #opens = 0;

  constructor(options: CircuitBreakerOptions, now: () => number = Date.now) {
    this.#options = options;
    this.#now = now;
    this.#cooldownMs = options.cooldownMs;
  }

  get state(): CircuitBreakerStatus['state'] {
    return this.#state;
  }

  /** Milliseconds until a probe may run; 0 when an attempt may run now. */
  get msUntilProbe(): number {
    return this.#state === 'open' ? Math.max(0, this.#nextProbeAt - this.#now()) : 0;
  }

  /** Whether a connect attempt may start now. Letting a probe through moves an open circuit to half-open. */
  tryAttempt(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'half-open' || this.#now() < this.#nextProbeAt) return false;
    this.#state = 'half-open';
    return true;
  }

  /** A connect opened a session: the circuit closes, but the failure count and the cooldown stand until `success()`. */
  connected(): void {
    this.#state = 'closed';
  }

  /** A connect proved good: the circuit closes and forgets past failures. */
  success(): void {
    this.#state = 'closed';
    this.#failures = 0;
    this.#cooldownMs = this.#options.cooldownMs;
  }

  failure(): void {
    this.#failures++;
    if (this.#state === 'half-open' || (this.#state === 'closed' && this.#failures >= this.#options.failureThreshold)) this.#open();
  }

  status(): CircuitBreakerStatus {
    return {
      state: this.#state,
      consecutiveFailures: this.#failures,
      // `now` need not be the wall clock (the pool's is monotonic): the probe is shown as the wall-clock time it is due.
      nextProbeAt: this.#state === 'open' ? new Date(Date.now() + this.#nextProbeAt - this.#now()).toISOString() : undefined,
      opens: this.#opens,
    };
  }

  #open(): void {
    // Past the threshold, this is not the first opening since the last success: wait twice as long.
    if (this.#failures > this.#options.failureThreshold) this.#cooldownMs = Math.min(this.#cooldownMs * 2, this.#options.maxCooldownMs);
    this.#state = 'open';
    this.#opens++;
    this.#nextProbeAt = this.#now() + this.#cooldownMs;
  }
}
