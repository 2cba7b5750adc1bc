import { createPool, type Pool } from 'generic-pool';
import { KlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import { describe } from './call-errors.ts';
import { realClock, type PoolClock } from './clock.ts';
import type { InFlightCall } from './in-flight-call.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import type { UpstreamSession } from './upstream-session.ts';

/**
 * What generic-pool holds: a session, or the failure of a connect attempt. A failed connect is handed to
 * the caller that asked for it instead of being thrown inside generic-pool, which would retry at once and
 * forever while anyone waits.
 */
export type Pooled = UpstreamSession | ConnectFailure;
export interface ConnectFailure {
  readonly failure: KlymError;
  /**
   * Whether the caller may try one more connect: one was really tried (not refused by the breaker or by
   * closing) and failed without using up `connectMs` (a second timeout would double the caller's wait).
   */
  readonly retryable: boolean;
  /** When the attempt ended, on the pool's clock: a waiter only takes failures newer than its request. */
  readonly at: number;
}

const isFailure = (pooled: Pooled): pooled is ConnectFailure => 'failure' in pooled;

/** A connect that failed `at` (the pool's clock), as `create` answers it to generic-pool. */
export const connectFailure = (failure: KlymError, at: number, retryable = false): ConnectFailure => ({ failure, retryable, at });

/** Whoever takes a session: `signal` is read only when it must wait for one (it may be made on demand). */
export interface Taker {
  readonly signal: AbortSignal;
}

/**
 * Where a call takes its session and gives it back: the upstream's lender by default, or a session scope
 * that keeps one session across its calls (`session-scope.ts`). Either may answer at once, without a promise.
 */
export interface SessionSource {
  take(call: InFlightCall): UpstreamSession | Promise<UpstreamSession>;
  put(session: UpstreamSession, sound: boolean): void | Promise<void>;
}

interface SessionLenderHooks {
  /** Opens a session, or answers the failure; never rejects. */
  create(): Promise<Pooled>;
  /** A session was closed after a call (not one found broken while idle): the upstream may open another. */
  onLost(): void;
}

/**
 * An upstream's sessions and who holds them. generic-pool owns them — it opens them, bounds them by
 * `pool.max`, queues the callers beyond it (`pool.maxWaiting`, `timeouts.acquireMs`) and drains them on
 * close — while the lender keeps the sessions that come back *checked out* as long as nobody waits in
 * generic-pool's queue, and lends them again from there: a call on an idle session then costs a pop and a
 * push, not generic-pool's acquire (a promise, a timer, a validation, a loan) and release. A session that
 * comes back while a caller waits goes back to generic-pool, which hands it to the first in line; a caller
 * only queues when no kept session is left, so none waits while one idles. How long a session sat idle is
 * read on `clock`; generic-pool's own wait (`acquireMs`) runs on Node's timers. Internal to the session pool.
 */
export class SessionLender implements SessionSource {
  readonly #config: ResolvedUpstreamConfig;
  readonly #hooks: SessionLenderHooks;
  readonly #clock: PoolClock;
  readonly #pool: Pool<Pooled>;
  /** Idle sessions still checked out of generic-pool; the most recently used is lent first. */
  readonly #kept: UpstreamSession[] = [];
  /** Errors of connects that failed fast: the request never left Klym, and one more try is cheap. */
  readonly #fastFailures = new WeakSet<object>();
  #closing = false;

  constructor(config: ResolvedUpstreamConfig, hooks: SessionLenderHooks, clock: PoolClock = realClock) {
    this.#config = config;
    this.#hooks = hooks;
    this.#clock = clock;
    this.#pool = createPool<Pooled>(
      {
        create: () => hooks.create(),
        destroy: async (pooled) => {
          if (!isFailure(pooled)) await pooled.close();
        },
        validate: async (pooled) => isFailure(pooled) || (await this.check(pooled)),
      },
      // min stays 0 here: generic-pool would refill it in a loop against a dead upstream; the upstream keeps it.
      { min: 0, max: config.max, maxWaitingClients: config.maxWaiting, testOnBorrow: true, acquireTimeoutMillis: config.acquireMs, autostart: false },
    );
  }

  /** Sessions open or opening, lent or not. */
  get size(): number {
    return this.#pool.size;
  }

  /** What `status()` shows of the sessions; `connecting` counts sessions generic-pool is still opening. */
  counts(connecting: number): { live: number; idle: number; borrowed: number; waiting: number } {
    const pool = this.#pool;
    return { live: pool.size - connecting, idle: pool.available + this.#kept.length, borrowed: pool.borrowed - this.#kept.length, waiting: pool.pending };
  }

  /**
   * Lends a session: a kept one that is sound at once (one idle past `idlePingMs` after a ping), else
   * one from generic-pool, waiting in its queue if all are lent.
   * @throws {KlymError} `UPSTREAM_UNAVAILABLE` naming the limit that was hit or the connect that failed, `POOL_CLOSED`, or the taker's abort reason.
   */
  take(taker?: Taker): UpstreamSession | Promise<UpstreamSession> {
    for (;;) {
      const session = this.#kept.pop();
      if (session === undefined) return this.#acquire(taker?.signal);
      if (session.broken !== undefined) {
        void this.#pool.destroy(session);
        continue;
      }
      if (!this.#idleLong(session)) return session;
      return this.#pingThenLend(session, taker);
    }
  }

  /** Takes back a session: kept for the next call if sound, handed to a waiting caller, or closed and replaced. */
  put(session: UpstreamSession, sound: boolean): void | Promise<void> {
    if (!sound || session.broken !== undefined || this.#closing) return this.#drop(session);
    session.idleSince = this.#clock.now();
    if (this.#pool.pending === 0) {
      this.#kept.push(session);
      return;
    }
    return this.#pool.release(session);
  }

  /** Closes a session instead of keeping it (its state was someone's own, or it broke), and lets the upstream replace it. */
  async #drop(pooled: Pooled): Promise<void> {
    await this.#pool.destroy(pooled);
    this.#hooks.onLost();
  }

  /** Whether this error is a connect that failed fast, so that the call never left Klym and may try once more. */
  failedFast(error: unknown): boolean {
    return typeof error === 'object' && error !== null && this.#fastFailures.has(error);
  }

  /**
   * Whether a session may be lent: sound, and answering a ping when it sat idle past `idlePingMs` (never a
   * fresh one, or a server that fails pings would be reconnected forever). Never rejects: generic-pool
   * would not catch it.
   */
  check(session: UpstreamSession): boolean | Promise<boolean> {
    if (session.broken !== undefined) return false;
    return this.#idleLong(session) ? this.#ping(session) : true;
  }

  /** Stops lending, waits until every lent session is back (the caller cuts calls short at its deadline), and closes them all. */
  async close(): Promise<void> {
    this.#closing = true;
    // generic-pool's drain waits for everything checked out, the kept sessions too.
    await Promise.all(this.#kept.splice(0).map((session) => this.#pool.release(session)));
    await this.#pool.drain();
    await this.#pool.clear();
  }

  #idleLong(session: UpstreamSession): boolean {
    return session.idleSince !== undefined && this.#clock.now() - session.idleSince >= this.#config.idlePingMs;
  }

  async #ping(session: UpstreamSession): Promise<boolean> {
    try {
      // 2026-07-28 has no `ping`: `server/discover` is its cheapest round trip.
      if (session.client.getProtocolEra() === 'modern') await session.client.discover({ timeout: this.#config.connectMs });
      else await session.client.ping({ timeout: this.#config.connectMs });
      return true;
    } catch (error) {
      session.breakOff(error instanceof Error ? error : new Error(String(error)));
      return false;
    }
  }

  async #pingThenLend(session: UpstreamSession, taker: Taker | undefined): Promise<UpstreamSession> {
    if (await this.#ping(session)) return session;
    // Broken off by the failed ping, which has the upstream replace it.
    await this.#pool.destroy(session);
    return this.take(taker);
  }

  async #acquire(signal?: AbortSignal): Promise<UpstreamSession> {
    const requestedAt = this.#clock.now();
    const name = this.#config.name;
    for (;;) {
      const pending = this.#pool.acquire();
      let pooled: Pooled;
      try {
        pooled = signal === undefined ? await pending : await raceAbort(pending, signal);
      } catch (error) {
        if (signal?.aborted) {
          // generic-pool cannot withdraw a waiter: hand back what it gets later.
          pending.then(
            (late) => (isFailure(late) ? this.#drop(late) : this.put(late, true)),
            () => {},
          );
          throw error;
        }
        if (this.#closing) throw new KlymError('POOL_CLOSED', `The pool is closed; upstream "${name}" takes no more calls`, { upstream: name });
        const busy = `${this.#pool.borrowed - this.#kept.length} of ${this.#config.max} busy`;
        // generic-pool's own words ("ResourceRequest timed out") would not tell the caller which limit was hit.
        const why =
          error instanceof Error && error.name === 'TimeoutError'
            ? `no session came free within ${this.#config.acquireMs} ms (${busy}; timeouts.acquireMs)`
            : this.#pool.pending >= this.#config.maxWaiting
              ? `no free session (${busy}) and ${this.#pool.pending} callers already wait (pool.maxWaiting ${this.#config.maxWaiting})`
              : `no free session (${busy}): ${describe(error)}`;
        throw new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${name}" is unavailable: ${why}`, { upstream: name, cause: error });
      }
      if (!isFailure(pooled)) return pooled;
      await this.#pool.destroy(pooled);
      if (pooled.at >= requestedAt) {
        if (pooled.retryable) this.#fastFailures.add(pooled.failure);
        throw pooled.failure;
      }
      // A failure left over from a caller that gave up: not this caller's answer.
    }
  }
}
