import type { PriorDiscovery } from '@modelcontextprotocol/client';
import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import { KlymError, isKlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import { createUpstreamFetch, type UpstreamFetch } from './upstream-fetch.ts';
import { callError, describe, leavesSessionSound } from './call-errors.ts';
import { CallCounts } from './call-counts.ts';
import { callRetry } from './call-retry.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import type { PoolClock, PoolTimer } from './clock.ts';
import { InFlightCall } from './in-flight-call.ts';
import { messageLimit } from './message-limit.ts';
import { observeCall } from './observe-call.ts';
import { connectFailure, SessionLender, type Pooled, type SessionSource } from './session-lender.ts';
import { handBack, lendLog } from './session-loan.ts';
import { ToolCache } from './tool-cache.ts';
import type { ResolvedUpstreamConfig } from './upstream-config.ts';
import { requestTool, requestToolList } from './upstream-requests.ts';
import type { CallToolOptions, UpstreamCall, UpstreamStatus } from './upstream-status.ts';
import { openSession, type SessionHooks, type UpstreamLogEntry, type UpstreamSession } from './upstream-session.ts';
import type { StderrCounts } from './upstream-stderr.ts';
import { UpstreamTokens } from './upstream-auth.ts';

interface UpstreamOptions {
  readonly clientInfo: SessionHooks['clientInfo'];
  readonly onLog: (entry: UpstreamLogEntry) => void;
  readonly onCall: ((call: UpstreamCall) => void) | undefined;
  /** Where the upstream reads the time and starts its timers. */
  readonly clock: PoolClock;
}

/** One use of a session by `#withSession`: a tool call, or a listing. */
interface SessionUse<T> {
  /** What is asked for (a tool's name, `tools/list`): errors name it. */
  readonly what: string;
  readonly options: Pick<CallToolOptions, 'signal' | 'timeoutMs' | 'onLog'>;
  /** Sends the request on the session lent, cut short with `call`. */
  readonly use: (session: UpstreamSession, call: InFlightCall) => Promise<T>;
  /** Where the session comes from and goes back to. @default the upstream's lender */
  readonly source?: SessionSource | undefined;
  /** Where a scope keeps the calls it may abort. */
  readonly calls?: Set<InFlightCall> | undefined;
  /** Where the call is counted (tool calls are, listings not). */
  readonly counts?: CallCounts | undefined;
}

/**
 * One upstream: its sessions (lent by a `SessionLender`) behind a circuit breaker, its tool list and its
 * counters, all on one clock. Each policy of a call has a file of its own: the retry rule (`call-retry.ts`),
 * the loan of a session and its log (`session-loan.ts`), the counters (`call-counts.ts`, `observe-call.ts`),
 * the requests and their time limits (`upstream-requests.ts`); this file keeps the flow. Internal to the
 * session pool.
 */
export class Upstream {
  readonly config: ResolvedUpstreamConfig;
  /** Where the upstream reads the time and starts its timers; a scope's sessions go idle on it too. */
  readonly clock: PoolClock;
  readonly #options: UpstreamOptions;
  readonly #fetch: UpstreamFetch;
  readonly #sessions: SessionLender;
  readonly #breaker: CircuitBreaker;
  /** The calls in flight: closing the pool cuts short those left at the drain deadline. */
  readonly #inFlight = new Set<InFlightCall>();
  /** Aborts connects under way when the pool closes. */
  readonly #closed = new AbortController();
  #transport: ResolvedUpstreamConfig['transport'];
  /**
   * What a session learnt of the upstream's era: later connects skip the `server/discover` probe. Forgotten
   * when a session is lost or a connect fails: the upstream may come back as another server (upgraded to
   * 2026-07-28, or back to 2025), and a remembered verdict would never find out.
   */
  #verdict: PriorDiscovery | undefined;
  /** The protocol revision the last session settled on. */
  #protocolVersion: string | undefined;
  readonly #tools = new ToolCache(() =>
    this.#withSession({ what: 'tools/list', options: {}, use: (session, call) => requestToolList(this.config.requestMs, session, call) }),
  );
  readonly #stderr: StderrCounts = { bytes: 0, lines: 0, droppedBytes: 0 };
  /** The upstream's access tokens (`auth`), shared by its sessions. */
  readonly #tokens: UpstreamTokens | undefined;
  readonly #calls = new CallCounts();
  #sessionIds = 0;
  #opened = 0;
  #connectAttempts = 0;
  /** Connects under way. */
  #connecting = 0;
  #connectFailing = false;
  #downReason: UpstreamStatus['reason'];
  #lastError: UpstreamStatus['lastError'];
  #probeTimer: PoolTimer | undefined;
  #closing = false;

  constructor(config: ResolvedUpstreamConfig, options: UpstreamOptions) {
    this.config = config;
    this.clock = options.clock;
    this.#options = options;
    this.#transport = config.transport;
    this.#breaker = new CircuitBreaker(config.breaker, options.clock.now);
    this.#tokens = config.auth === undefined || config.url === undefined ? undefined : new UpstreamTokens(config.auth, config.url, options.clock);
    const host = Object.entries(config.headers).find(([key]) => key.toLowerCase() === 'host')?.[1];
    this.#fetch = createUpstreamFetch(host, messageLimit(config, options.onLog));
    this.#sessions = new SessionLender(config, { create: () => this.#create(), onLost: () => this.#keepMinimum() }, options.clock);
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
    const opened = await Promise.allSettled(Array.from({ length: this.config.min }, () => this.#sessions.take()));
    await Promise.all(opened.map((result) => (result.status === 'fulfilled' ? this.#sessions.put(result.value, true) : undefined)));
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

  /**
   * Calls `toolName` on a pooled session (or one `source` holds) and gives the session back; one that broke
   * is replaced. `calls` is where a scope keeps the calls it may abort.
   */
  callTool(
    toolName: string,
    args: Record<string, unknown>,
    options: CallToolOptions = {},
    source?: SessionSource,
    calls?: Set<InFlightCall>,
  ): Promise<CallToolResult> {
    const use = (session: UpstreamSession, call: InFlightCall): Promise<CallToolResult> => requestTool(this.config, session, call, toolName, args, options);
    const calling = this.#withSession({ what: toolName, options, use, source, calls, counts: this.#calls });
    const { onCall } = this.#options;
    if (onCall === undefined) return calling;
    return observeCall(calling, onCall, { upstream: this.name, toolName, listed: () => this.#tools.has(toolName) }, this.clock);
  }

  /** Lends a session for a scope to hold across calls: counted against `pool.max`, waiting bounded by `acquireMs`, behind the breaker. */
  async takeSession(call: InFlightCall): Promise<UpstreamSession> {
    return await this.#sessions.take(call);
  }

  /** Whether a held session may serve another call: sound, and answering a ping when it sat idle long. Never rejects. */
  checkSession(session: UpstreamSession): boolean | Promise<boolean> {
    return this.#sessions.check(session);
  }

  /** Closes a session a scope held instead of giving it back: its state was the scope's. */
  async dropSession(session: UpstreamSession): Promise<void> {
    await this.#sessions.put(session, false);
  }

  status(): UpstreamStatus {
    const state = this.#closing ? 'closed' : this.#connectFailing ? 'down' : this.#opened === 0 ? 'connecting' : 'ready';
    return {
      state,
      ...(state === 'down' && this.#downReason !== undefined ? { reason: this.#downReason } : {}),
      transport: this.#transport,
      ...(this.#protocolVersion === undefined ? {} : { protocolVersion: this.#protocolVersion }),
      breaker: this.#breaker.status(),
      sessions: {
        // generic-pool's `size` also counts sessions still connecting.
        ...this.#sessions.counts(this.#connecting),
        opened: this.#opened,
        connectAttempts: this.#connectAttempts,
      },
      calls: this.#calls.status(this.#inFlight.size),
      ...(this.config.transport === 'stdio' ? { stderr: { ...this.#stderr } } : {}),
      lastError: this.#lastError,
    };
  }

  /**
   * Stops lending sessions, lets borrowed ones come back until `deadline` (on the upstream's clock), then
   * aborts what is still in flight with `POOL_CLOSED` and closes every session.
   */
  async close(deadline: number): Promise<void> {
    this.#closing = true;
    this.clock.clearTimeout(this.#probeTimer);
    this.#closed.abort(new KlymError('POOL_CLOSED', `The pool closed while connecting to upstream "${this.name}"`, { upstream: this.name }));
    const timer = this.clock.setTimeout(
      () => {
        for (const call of this.#inFlight) {
          call.fail(new KlymError('POOL_CLOSED', `The pool closed before the call to upstream "${this.name}" finished`, { upstream: this.name }));
        }
      },
      Math.max(0, deadline - this.clock.now()),
    );
    try {
      await this.#sessions.close();
    } finally {
      this.clock.clearTimeout(timer);
    }
    await this.#fetch.close();
  }

  /**
   * Runs `use` on a borrowed session, counting the call in `counts`. A request that provably never reached
   * the upstream (a connect that failed, a session the server no longer knows) is tried once more on a fresh
   * session; one whose outcome is unknown never is (`call-retry.ts`).
   */
  async #withSession<T>({ what, options, use, source = this.#sessions, calls, counts }: SessionUse<T>): Promise<T> {
    counts?.start();
    if (this.#closing) {
      counts?.fail();
      throw new KlymError('POOL_CLOSED', `The pool is closed; upstream "${this.name}" takes no more calls`, { upstream: this.name });
    }
    const call = new InFlightCall(options.signal, this.clock);
    this.#inFlight.add(call);
    calls?.add(call);
    try {
      call.throwIfCut();
      for (let attempt = 1; ; attempt++) {
        let session: UpstreamSession;
        try {
          const taken = source.take(call);
          session = taken instanceof Promise ? await taken : taken;
        } catch (error) {
          if (callRetry.afterTake(attempt, call, { failedFast: this.#sessions.failedFast(error), breakerClosed: this.#breaker.state === 'closed' })) continue;
          throw error;
        }
        lendLog(session, options.onLog);
        let sound = false;
        try {
          call.throwIfCut();
          const result = await use(session, call);
          sound = true;
          counts?.succeed();
          return result;
        } catch (error) {
          if (callRetry.afterRequest(attempt, call, error)) {
            session.breakOff(error as Error);
            continue;
          }
          sound = leavesSessionSound(error);
          // Cut short while the request was under way: what the upstream did with it is not known.
          throw this.#callError(call.aborted ? undefined : error, what, options, call, session.broken);
        } finally {
          const handed = handBack(source, session, sound, options.onLog);
          if (handed !== undefined) await handed;
        }
      }
    } catch (error) {
      const failure = this.#callError(error, what, options, call, undefined);
      counts?.fail();
      this.#record(failure);
      throw failure;
    } finally {
      call.end();
      this.#inFlight.delete(call);
      calls?.delete(call);
      counts?.end(call.elapsedMs);
    }
  }

  /** A call's failure as a `KlymError`: what the pool cut it short with, or what `error` means. */
  #callError(error: unknown, toolName: string, options: Pick<CallToolOptions, 'timeoutMs'>, call: InFlightCall, broken: Error | undefined): KlymError {
    return call.failure ?? callError(error, { upstream: this.name, toolName, aborted: call, timeoutMs: options.timeoutMs ?? this.config.requestMs, broken });
  }

  async #create(): Promise<Pooled> {
    if (this.#closing)
      return connectFailure(
        new KlymError('POOL_CLOSED', `The pool is closed; upstream "${this.name}" takes no more calls`, { upstream: this.name }),
        this.clock.now(),
      );
    if (!this.#breaker.tryAttempt()) {
      // A probe timer may fire a millisecond before the breaker's clock allows it: keep the chain going.
      this.#scheduleProbe();
      const { consecutiveFailures } = this.#breaker.status();
      return connectFailure(
        new KlymError(
          'UPSTREAM_UNAVAILABLE',
          `Upstream "${this.name}" is unavailable: ${consecutiveFailures} connects failed in a row; next try in ${this.#breaker.msUntilProbe} ms. Last: ${this.#lastError?.message ?? 'unknown'}`,
          { upstream: this.name },
        ),
        this.clock.now(),
      );
    }
    this.#connectAttempts++;
    let connectedAt = Number.POSITIVE_INFINITY;
    let proving: PoolTimer | undefined;
    const hooks: SessionHooks = {
      fetch: this.#fetch.fetch,
      clientInfo: this.#options.clientInfo,
      clock: this.clock,
      stderr: this.#stderr,
      authProvider: this.#tokens,
      verdict: this.#verdict,
      onLog: this.#options.onLog,
      onToolsChanged: () => this.#tools.invalidate(),
      onBroken: (_session, reason, byUpstream) => {
        this.clock.clearTimeout(proving);
        // The next listing comes from a fresh session, which may serve other tools, and the next connect probes again.
        this.#tools.invalidate();
        if (byUpstream) this.#verdict = undefined;
        const livedMs = this.clock.now() - connectedAt;
        if (byUpstream && livedMs < this.config.breaker.cooldownMs && !this.#closing) {
          const lost = `its session closed ${Math.round(livedMs)} ms after connecting (${describe(reason)})`;
          this.#connectFailed(
            new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${lost}`, { upstream: this.name, cause: reason }),
            'closed-after-connect',
          );
        }
        this.#keepMinimum(true);
      },
    };
    const startedAt = this.clock.now();
    this.#connecting++;
    try {
      const session = await openSession(this.config, this.#transport, ++this.#sessionIds, hooks, this.#closed.signal).finally(() => this.#connecting--);
      this.#transport = session.transport;
      this.#verdict = session.verdict;
      this.#protocolVersion = session.protocolVersion;
      this.#opened++;
      this.#connectFailing = false;
      connectedAt = this.clock.now();
      this.#breaker.connected();
      // A session that dies sooner than the breaker's cooldown counts as a failed connect (see onBroken):
      // reconnecting to a server that answers `initialize` and exits would otherwise never back off.
      proving = this.clock.setTimeout(() => {
        if (session.broken === undefined) this.#breaker.success();
      }, this.config.breaker.cooldownMs);
      proving.unref?.();
      return session;
    } catch (error) {
      const failure = isKlymError(error)
        ? error
        : new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${this.name}" is unavailable: ${describe(error)}`, { upstream: this.name, cause: error });
      this.#connectFailed(failure, 'connect-failed');
      const endedAt = this.clock.now();
      return connectFailure(failure, endedAt, endedAt - startedAt < this.config.connectMs);
    }
  }

  /** A connect failed, or its session died right after it: the breaker counts it, and `status()` says why. */
  #connectFailed(failure: KlymError, reason: NonNullable<UpstreamStatus['reason']>): void {
    this.#connectFailing = true;
    this.#verdict = undefined;
    this.#downReason = reason;
    this.#breaker.failure();
    this.#record(failure);
    this.#scheduleProbe();
  }

  /** Opens a session and returns it to the pool, as the kept minimum. */
  async #warm(): Promise<void> {
    try {
      await this.#sessions.put(await this.#sessions.take(), true);
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
    this.clock.clearTimeout(this.#probeTimer);
    this.#probeTimer = this.clock.setTimeout(() => void this.#warm(), this.#breaker.msUntilProbe);
    this.#probeTimer.unref?.();
  }

  #record(error: unknown): void {
    const { code, message } = isKlymError(error) ? error : { code: 'UPSTREAM_ERROR', message: describe(error) };
    this.#lastError = { code, message, at: new Date().toISOString() };
  }
}
