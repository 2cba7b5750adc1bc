import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { createPool, type Pool } from 'generic-pool';
import { KlymError, isKlymError } from '../errors.ts';
import { anySignal, raceAbort } from '../internal/abort.ts';
import { createUpstreamFetch, type UpstreamFetch } from '../internal/upstream-fetch.ts';
import { callError, describe, leavesSessionSound, neverReachedUpstream } from './call-errors.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import type { CallToolOptions, UpstreamStatus } from './upstream-status.ts';
import { openSession, type SessionHooks, type UpstreamLogEntry, type UpstreamSession } from './upstream-session.ts';

interface UpstreamOptions {
  readonly clientInfo: SessionHooks['clientInfo'];
  readonly onLog: (entry: UpstreamLogEntry) => void;
}

/**
 * What generic-pool holds: a session, or the failure of a connect attempt. A failed connect is handed to
 * the caller that asked for it instead of being thrown inside generic-pool, which would retry at once and
 * forever while anyone waits.
 */
type Pooled = UpstreamSession | ConnectFailure;
interface ConnectFailure {
  readonly failure: KlymError;
  /**
   * Whether the caller may try one more connect: one was really tried (not refused by the breaker or by
   * closing) and failed without using up `connectMs` (a second timeout would double the caller's wait).
   */
  readonly retryable: boolean;
  /** `performance.now()` when the attempt ended: a waiter only takes failures newer than its request. */
  readonly at: number;
}

const isFailure = (pooled: Pooled): pooled is ConnectFailure => 'failure' in pooled;
const fail = (failure: KlymError, retryable = false): ConnectFailure => ({ failure, retryable, at: performance.now() });

/**
 * One upstream: a generic-pool of sessions behind a circuit breaker, its tool list and its counters.
 * Internal to the session pool.
 */
export class Upstream {
  readonly config: ResolvedUpstreamConfig;
  readonly #options: UpstreamOptions;
  readonly #fetch: UpstreamFetch;
  readonly #sessions: Pool<Pooled>;
  readonly #breaker: CircuitBreaker;
  readonly #inFlight = new Set<AbortController>();
  /** Errors of connects that failed fast: the request never left Klym, and one more try is cheap. */
  readonly #connectFailures = new WeakSet<object>();
  /** Aborts connects under way when the pool closes. */
  readonly #closed = new AbortController();
  #transport: ResolvedUpstreamConfig['transport'];
  #tools: Promise<readonly Tool[]> | undefined;
  #sessionIds = 0;
  #opened = 0;
  #connectAttempts = 0;
  #connectFailing = false;
  #calls = { started: 0, succeeded: 0, failed: 0 };
  #lastError: UpstreamStatus['lastError'];
  #probeTimer: NodeJS.Timeout | undefined;
  #closing = false;

  constructor(config: ResolvedUpstreamConfig, options: UpstreamOptions) {
    this.config = config;
    this.#options = options;
    this.#transport = config.transport;
    this.#breaker = new CircuitBreaker(config.breaker);
    const host = Object.entries(config.headers).find(([key]) => key.toLowerCase() === 'host')?.[1];
    this.#fetch = createUpstreamFetch(host);
    this.#sessions = createPool<Pooled>(
      {
        create: () => this.#create(),
        destroy: async (pooled) => {
          if (!isFailure(pooled)) await pooled.close();
        },
        validate: (pooled) => this.#validate(pooled),
      },
      // min stays 0 here: generic-pool would refill it in a loop against a dead upstream; #warm keeps it.
      { min: 0, max: config.max, maxWaitingClients: config.maxWaiting, testOnBorrow: true, acquireTimeoutMillis: config.acquireMs, autostart: false },
    );
  }

  get name(): string {
    return this.config.name;
  }

  /** Opens the configured minimum of sessions; failures are recorded in `status()`, not thrown. */
  async start(): Promise<void> {
    // Held together, so that `min` sessions really open (one given back early would be lent to the next).
    const opened = await Promise.allSettled(Array.from({ length: this.config.min }, () => this.#acquire()));
    await Promise.all(opened.map((result) => (result.status === 'fulfilled' ? this.#giveBack(result.value, true) : undefined)));
  }

  /**
   * The upstream's tools, cached until it says they changed or a session breaks. The listing is shared by
   * every caller, so it runs under no caller's signal: one that gives up stops waiting, the others do not.
   */
  listTools(signal?: AbortSignal): Promise<readonly Tool[]> {
    const listing = (this.#tools ??= this.#withSession('tools/list', {}, async (session, callSignal) => {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await session.client.listTools(cursor === undefined ? {} : { cursor }, { signal: callSignal, timeout: this.config.requestMs });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return tools;
    }));
    listing.catch(() => {
      if (this.#tools === listing) this.#tools = undefined;
    });
    return signal === undefined ? listing : raceAbort(listing, signal);
  }

  /** Calls `toolName` on a pooled session and gives the session back; one that broke is replaced. */
  async callTool(toolName: string, args: Record<string, unknown>, options: CallToolOptions = {}): Promise<CallToolResult> {
    this.#calls.started++;
    const timeout = options.timeoutMs ?? this.config.requestMs;
    const maxTotalMs = Math.max(timeout, this.config.maxTotalMs);
    try {
      const result = await this.#withSession(toolName, options, async (session, signal) => {
        // The SDK checks `maxTotalTimeout` only when progress arrives, and then sends no cancellation: a timer of our own does both.
        const limit = options.onProgress === undefined ? undefined : new AbortController();
        const timer = limit === undefined ? undefined : setTimeout(() => limit.abort(), maxTotalMs);
        try {
          const progress = options.onProgress === undefined ? {} : { onprogress: options.onProgress, resetTimeoutOnProgress: true };
          return await session.client.callTool({ name: toolName, arguments: args }, undefined, { signal: anySignal(signal, limit?.signal), timeout, ...progress });
        } catch (error) {
          if (limit === undefined || !limit.signal.aborted || signal.aborted) throw error;
          const message = `Upstream "${this.name}" did not finish ${toolName} within ${maxTotalMs} ms (timeouts.maxTotalMs), however much progress it reported; it was sent a cancellation`;
          throw new KlymError('UPSTREAM_TIMEOUT', message, { upstream: this.name, toolName, cause: error });
        } finally {
          clearTimeout(timer);
        }
      });
      this.#calls.succeeded++;
      return result as CallToolResult;
    } catch (error) {
      this.#calls.failed++;
      throw error;
    }
  }

  status(): UpstreamStatus {
    const pool = this.#sessions;
    return {
      state: this.#closing ? 'closed' : this.#connectFailing ? 'down' : this.#opened === 0 ? 'connecting' : 'ready',
      transport: this.#transport,
      breaker: this.#breaker.status(),
      sessions: {
        live: pool.size,
        idle: pool.available,
        borrowed: pool.borrowed,
        waiting: pool.pending,
        opened: this.#opened,
        connectAttempts: this.#connectAttempts,
      },
      calls: { ...this.#calls, inFlight: this.#inFlight.size },
      lastError: this.#lastError,
    };
  }

  /**
   * Stops lending sessions, lets borrowed ones come back until `deadline`, then aborts what is still in
   * flight with `POOL_CLOSED` and closes every session.
   */
  async close(deadline: number): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#probeTimer);
    this.#closed.abort(new KlymError('POOL_CLOSED', `The pool closed while connecting to upstream "${this.name}"`, { upstream: this.name }));
    const timer = setTimeout(() => {
      for (const controller of this.#inFlight) {
        controller.abort(new KlymError('POOL_CLOSED', `The pool closed before the call to upstream "${this.name}" finished`, { upstream: this.name }));
      }
    }, Math.max(0, deadline - Date.now()));
    try {
      await this.#sessions.drain();
    } finally {
      clearTimeout(timer);
    }
    await this.#sessions.clear();
    await this.#fetch.close();
  }

  /**
   * Runs `use` on a borrowed session. A request that provably never reached the upstream (a connect that
   * failed, a session the server no longer knows) is tried once more on a fresh session; one whose
   * outcome is unknown never is.
   */
  async #withSession<T>(
    what: string,
    options: Pick<CallToolOptions, 'signal' | 'timeoutMs' | 'onLog'>,
    use: (session: UpstreamSession, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    if (this.#closing) throw new KlymError('POOL_CLOSED', `The pool is closed; upstream "${this.name}" takes no more calls`, { upstream: this.name });
    const controller = new AbortController();
    const signal = anySignal(options.signal, controller.signal);
    const context = { upstream: this.name, toolName: what, signal: options.signal, timeoutMs: options.timeoutMs ?? this.config.requestMs };
    this.#inFlight.add(controller);
    try {
      signal.throwIfAborted();
      for (let attempt = 1; ; attempt++) {
        let session: UpstreamSession;
        try {
          session = await this.#acquire(signal);
        } catch (error) {
          // A connect that failed never carried the request: one more try, unless the breaker now refuses.
          if (attempt === 1 && this.#connectFailures.has(error as object) && this.#breaker.state === 'closed' && !signal.aborted) continue;
          throw error;
        }
        session.borrowerLog = options.onLog;
        let sound = false;
        try {
          const result = await use(session, signal);
          sound = true;
          return result;
        } catch (error) {
          if (attempt === 1 && neverReachedUpstream(error) && !signal.aborted) {
            session.breakOff(error as Error);
            continue;
          }
          sound = leavesSessionSound(error);
          throw callError(controller.signal.aborted ? controller.signal.reason : error, { ...context, broken: session.broken });
        } finally {
          // Stderr comes on its own pipe: lines the child wrote before answering may be read just after the answer.
          if (session.transport === 'stdio' && options.onLog !== undefined) await new Promise(setImmediate);
          session.borrowerLog = undefined;
          await this.#giveBack(session, sound);
        }
      }
    } catch (error) {
      const failure = callError(controller.signal.aborted ? controller.signal.reason : error, { ...context, broken: undefined });
      this.#record(failure);
      throw failure;
    } finally {
      this.#inFlight.delete(controller);
    }
  }

  async #acquire(signal?: AbortSignal): Promise<UpstreamSession> {
    const requestedAt = performance.now();
    for (;;) {
      const pending = this.#sessions.acquire();
      let pooled: Pooled;
      try {
        pooled = signal === undefined ? await pending : await raceAbort(pending, signal);
      } catch (error) {
        if (signal?.aborted) {
          // generic-pool cannot withdraw a waiter: hand back what it gets later.
          pending.then((late) => this.#giveBack(late, true), () => {});
          throw error;
        }
        if (this.#closing) throw new KlymError('POOL_CLOSED', `The pool is closed; upstream "${this.name}" takes no more calls`, { upstream: this.name });
        const busy = `${this.#sessions.borrowed} of ${this.config.max} busy`;
        // generic-pool's own words ("ResourceRequest timed out") would not tell the caller which limit was hit.
        const why =
          error instanceof Error && error.name === 'TimeoutError'
            ? `no session came free within ${this.config.acquireMs} ms (${busy}; timeouts.acquireMs)`
            : this.#sessions.pending >= this.config.maxWaiting
              ? `no free session (${busy}) and ${this.#sessions.pending} callers already wait (pool.maxWaiting ${this.config.maxWaiting})`
              : `no free session (${busy}): ${describe(error)}`;
        throw new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${why}`, { upstream: this.name, cause: error });
      }
      if (!isFailure(pooled)) return pooled;
      await this.#sessions.destroy(pooled);
      if (pooled.at >= requestedAt) {
        if (pooled.retryable) this.#connectFailures.add(pooled.failure);
        throw pooled.failure;
      }
      // A failure left over from a caller that gave up: not this caller's answer.
    }
  }

  async #giveBack(pooled: Pooled, sound: boolean): Promise<void> {
    if (!isFailure(pooled) && sound && pooled.broken === undefined && !this.#closing) {
      pooled.idleSince = performance.now();
      await this.#sessions.release(pooled);
      return;
    }
    await this.#sessions.destroy(pooled);
    this.#keepMinimum();
  }

  async #create(): Promise<Pooled> {
    if (this.#closing) return fail(new KlymError('POOL_CLOSED', `The pool is closed; upstream "${this.name}" takes no more calls`, { upstream: this.name }));
    if (!this.#breaker.tryAttempt()) {
      // A probe timer may fire a millisecond before the breaker's clock allows it: keep the chain going.
      this.#scheduleProbe();
      const { consecutiveFailures } = this.#breaker.status();
      return fail(
        new KlymError(
          'UPSTREAM_UNAVAILABLE',
          `Upstream "${this.name}" is unavailable: ${consecutiveFailures} connects failed in a row; next try in ${this.#breaker.msUntilProbe} ms. Last: ${this.#lastError?.message ?? 'unknown'}`,
          { upstream: this.name },
        ),
      );
    }
    this.#connectAttempts++;
    const hooks: SessionHooks = {
      fetch: this.#fetch.fetch,
      clientInfo: this.#options.clientInfo,
      onLog: this.#options.onLog,
      onToolsChanged: () => {
        this.#tools = undefined;
      },
      onBroken: () => {
        // The next listing comes from a fresh session, which may serve other tools.
        this.#tools = undefined;
        this.#keepMinimum(true);
      },
    };
    const startedAt = performance.now();
    try {
      const session = await openSession(this.config, this.#transport, ++this.#sessionIds, hooks, this.#closed.signal);
      this.#transport = session.transport;
      this.#opened++;
      this.#connectFailing = false;
      this.#breaker.success();
      return session;
    } catch (error) {
      const failure = isKlymError(error) ? error : new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${describe(error)}`, { upstream: this.name, cause: error });
      this.#connectFailing = true;
      this.#breaker.failure();
      this.#record(failure);
      this.#scheduleProbe();
      return fail(failure, performance.now() - startedAt < this.config.connectMs);
    }
  }

  /**
   * Lends sessions only if sound; pings one that sat idle long (never a fresh one, or a server that fails
   * pings would be reconnected forever). Never rejects: generic-pool would not catch it.
   */
  async #validate(pooled: Pooled): Promise<boolean> {
    if (isFailure(pooled)) return true;
    if (pooled.broken !== undefined) return false;
    if (pooled.idleSince === undefined || performance.now() - pooled.idleSince < this.config.idlePingMs) return true;
    try {
      await pooled.client.ping({ timeout: this.config.connectMs });
      return true;
    } catch (error) {
      pooled.breakOff(error instanceof Error ? error : new Error(String(error)));
      return false;
    }
  }

  /** Opens a session and returns it to the pool, as the kept minimum. */
  async #warm(): Promise<void> {
    try {
      await this.#giveBack(await this.#acquire(), true);
    } catch {
      // Recorded in status(); a probe is scheduled while the breaker is open.
    }
  }

  /** Replaces sessions lost below the minimum (`always`: one just broke but still counts in the pool). */
  #keepMinimum(always = false): void {
    if (this.#closing || this.config.min === 0 || this.#breaker.state !== 'closed') return;
    if (always || this.#sessions.size < this.config.min) setImmediate(() => void this.#warm());
  }

  /** While the breaker is open and sessions are wanted, one probe per cooldown: bounded, never a storm. */
  #scheduleProbe(): void {
    if (this.#closing || this.config.min === 0 || this.#breaker.state !== 'open') return;
    clearTimeout(this.#probeTimer);
    this.#probeTimer = setTimeout(() => void this.#warm(), this.#breaker.msUntilProbe);
    this.#probeTimer.unref();
  }

  #record(error: unknown): void {
    const { code, message } = isKlymError(error) ? error : { code: 'UPSTREAM_ERROR', message: describe(error) };
    this.#lastError = { code, message, at: new Date().toISOString() };
  }
}
