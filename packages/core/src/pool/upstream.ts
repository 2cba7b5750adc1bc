import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { createPool, type Pool } from 'generic-pool';
import { KlymError, isKlymError } from '../errors.ts';
import { anySignal, raceAbort } from '../internal/abort.ts';
import { createUpstreamFetch, type UpstreamFetch } from '../internal/upstream-fetch.ts';
import { callError, describe, leavesSessionSound, neverReachedUpstream } from './call-errors.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { ToolCache } from './tool-cache.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import type { CallToolOptions, UpstreamStatus } from './upstream-status.ts';
import { openSession, type SessionHooks, type UpstreamLogEntry, type UpstreamSession } from './upstream-session.ts';
import type { StderrCounts } from './upstream-stderr.ts';

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
 * Where a call takes its session and gives it back: the upstream's pool by default, or a session scope
 * that keeps one session across its calls (`session-scope.ts`).
 */
export interface SessionSource {
  take(signal: AbortSignal): Promise<UpstreamSession>;
  put(session: UpstreamSession, sound: boolean): Promise<void>;
}

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
  readonly #tools = new ToolCache(() => this.#withSession('tools/list', {}, (session, signal) => this.#listOn(session, signal)));
  readonly #stderr: StderrCounts = { bytes: 0, lines: 0, droppedBytes: 0 };
  #sessionIds = 0;
  #opened = 0;
  #connectAttempts = 0;
  /** Connects under way. */
  #connecting = 0;
  #connectFailing = false;
  #downReason: UpstreamStatus['reason'];
  #calls = { started: 0, succeeded: 0, failed: 0 };
  #lastError: UpstreamStatus['lastError'];
  #probeTimer: NodeJS.Timeout | undefined;
  #closing = false;
  readonly #pooled: SessionSource = { take: (signal) => this.#acquire(signal), put: (session, sound) => this.#giveBack(session, sound) };

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

  /**
   * Opens the configured minimum of sessions, then lists the tools; failures are recorded in `status()`,
   * not thrown. The pool runs it in the background: nothing waits for an upstream at start-up.
   */
  async start(): Promise<void> {
    // Held together, so that `min` sessions really open (one given back early would be lent to the next).
    const opened = await Promise.allSettled(Array.from({ length: this.config.min }, () => this.#acquire()));
    await Promise.all(opened.map((result) => (result.status === 'fulfilled' ? this.#giveBack(result.value, true) : undefined)));
    // Listed while the sessions are idle, so that the first tasks find a list even if long calls take every session.
    if (opened.some((result) => result.status === 'fulfilled')) await this.#tools.refresh().catch(() => {});
  }

  /**
   * The upstream's tools: the last good list, refreshed after the upstream says it changed or a session
   * breaks. The refresh takes whichever session comes free first, and meanwhile the last good list is
   * served (not for an upstream that is `down`: its old list would offer tools that cannot be called).
   * The listing is shared by every caller, so it runs under no caller's signal: one that gives up stops
   * waiting, the others do not. With `waitForConnect: false`, an upstream still connecting or down that
   * has no list to serve is reported at once instead of waited for.
   */
  listTools(signal?: AbortSignal, { waitForConnect = true }: { readonly waitForConnect?: boolean } = {}): Promise<readonly Tool[]> {
    const fresh = this.#connectFailing;
    if (!waitForConnect && (this.#opened === 0 || fresh) && !this.#tools.serves({ fresh })) {
      // Nobody else may be about to list (an upstream with `pool.min: 0` opens nothing by itself).
      if (this.#sessions.size === 0 && !this.#tools.refreshing) this.#tools.refresh().catch(() => {});
      const why = fresh ? `is down: ${this.#lastError?.message ?? 'its connects fail'}` : 'is still connecting; its tools are listed once it answers';
      return Promise.reject(new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" ${why}`, { upstream: this.name }));
    }
    const listing = this.#tools.get({ fresh });
    return signal === undefined ? listing : raceAbort(listing, signal);
  }

  /** Calls `toolName` on a pooled session (or one `source` holds) and gives the session back; one that broke is replaced. */
  async callTool(toolName: string, args: Record<string, unknown>, options: CallToolOptions = {}, source?: SessionSource): Promise<CallToolResult> {
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
      }, source);
      this.#calls.succeeded++;
      return result as CallToolResult;
    } catch (error) {
      this.#calls.failed++;
      throw error;
    }
  }

  /** Lends a session for a scope to hold across calls: counted against `pool.max`, waiting bounded by `acquireMs`, behind the breaker. */
  takeSession(signal: AbortSignal): Promise<UpstreamSession> {
    return this.#acquire(signal);
  }

  /** Whether a held session may serve another call: sound, and answering a ping when it sat idle long. Never rejects. */
  checkSession(session: UpstreamSession): Promise<boolean> {
    return this.#validate(session);
  }

  /** Closes a session a scope held instead of giving it back: its state was the scope's. */
  dropSession(session: UpstreamSession): Promise<void> {
    return this.#giveBack(session, false);
  }

  status(): UpstreamStatus {
    const pool = this.#sessions;
    const state = this.#closing ? 'closed' : this.#connectFailing ? 'down' : this.#opened === 0 ? 'connecting' : 'ready';
    return {
      state,
      ...(state === 'down' && this.#downReason !== undefined ? { reason: this.#downReason } : {}),
      transport: this.#transport,
      breaker: this.#breaker.status(),
      sessions: {
        // generic-pool's `size` also counts sessions still connecting.
        live: pool.size - this.#connecting,
        idle: pool.available,
        borrowed: pool.borrowed,
        waiting: pool.pending,
        opened: this.#opened,
        connectAttempts: this.#connectAttempts,
      },
      calls: { ...this.#calls, inFlight: this.#inFlight.size },
      ...(this.config.transport === 'stdio' ? { stderr: { ...this.#stderr } } : {}),
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
    source: SessionSource = this.#pooled,
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
          session = await source.take(signal);
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
          await source.put(session, sound);
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
    let connectedAt = Number.POSITIVE_INFINITY;
    let proving: NodeJS.Timeout | undefined;
    const hooks: SessionHooks = {
      fetch: this.#fetch.fetch,
      clientInfo: this.#options.clientInfo,
      stderr: this.#stderr,
      onLog: this.#options.onLog,
      onToolsChanged: () => this.#tools.invalidate(),
      onBroken: (_session, reason, byUpstream) => {
        clearTimeout(proving);
        // The next listing comes from a fresh session, which may serve other tools.
        this.#tools.invalidate();
        const livedMs = performance.now() - connectedAt;
        if (byUpstream && livedMs < this.config.breaker.cooldownMs && !this.#closing) {
          const lost = `its session closed ${Math.round(livedMs)} ms after connecting (${describe(reason)})`;
          this.#connectFailed(new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${lost}`, { upstream: this.name, cause: reason }), 'closed-after-connect');
        }
        this.#keepMinimum(true);
      },
    };
    const startedAt = performance.now();
    this.#connecting++;
    try {
      const session = await openSession(this.config, this.#transport, ++this.#sessionIds, hooks, this.#closed.signal).finally(() => this.#connecting--);
      this.#transport = session.transport;
      this.#opened++;
      this.#connectFailing = false;
      connectedAt = performance.now();
      this.#breaker.connected();
      // A session that dies sooner than the breaker's cooldown counts as a failed connect (see onBroken):
      // reconnecting to a server that answers `initialize` and exits would otherwise never back off.
      proving = setTimeout(() => {
        if (session.broken === undefined) this.#breaker.success();
      }, this.config.breaker.cooldownMs);
      proving.unref();
      return session;
    } catch (error) {
      const failure = isKlymError(error) ? error : new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${describe(error)}`, { upstream: this.name, cause: error });
      this.#connectFailed(failure, 'connect-failed');
      return fail(failure, performance.now() - startedAt < this.config.connectMs);
    }
  }

  /** A connect failed, or its session died right after it: the breaker counts it, and `status()` says why. */
  #connectFailed(failure: KlymError, reason: NonNullable<UpstreamStatus['reason']>): void {
    this.#connectFailing = true;
    this.#downReason = reason;
    this.#breaker.failure();
    this.#record(failure);
    this.#scheduleProbe();
  }

  /** Lists every page of the upstream's tools on `session`. */
  async #listOn(session: UpstreamSession, signal: AbortSignal): Promise<readonly Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await session.client.listTools(cursor === undefined ? {} : { cursor }, { signal, timeout: this.config.requestMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
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
