import type { CallToolResult } from '@modelcontextprotocol/client';
import { KlymError, isKlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import type { InFlightCall } from './in-flight-call.ts';
import type { SessionSource } from './session-lender.ts';
import type { Upstream } from './upstream.ts';
import type { CallToolOptions } from './upstream-status.ts';
import type { UpstreamSession } from './upstream-session.ts';

/**
 * The calls of one task (or one run), kept apart from everyone else's where an upstream keeps state per
 * session. On an upstream with `sessionScope: 'task'` the scope's calls go to a session of its own, opened
 * on first use (counted against the upstream's `pool.max`, waiting at most `timeouts.acquireMs`), kept
 * across its calls and closed with the scope: it never goes back to the pool, since its state is the
 * scope's. On a `shared` upstream they go through the pool as `SessionPool.callTool` does.
 *
 * Opened by `SessionPool.openScope`; whoever opens one closes it.
 */
export interface SessionScope extends AsyncDisposable {
  /** Whose calls these are (a task's id); errors name it. */
  readonly id: string;
  /**
   * Calls a tool (by its upstream name) as `SessionPool.callTool` does; on a `task`-scoped upstream, on
   * this scope's own session, one call at a time. A call that costs the scope its session (the upstream
   * was lost, the call timed out or was aborted) says that the state the upstream kept for it is lost;
   * the next call opens a fresh session.
   * @throws {KlymError} as `SessionPool.callTool`; `POOL_CLOSED` once the scope is closed.
   */
  callTool(upstream: string, toolName: string, args?: Record<string, unknown>, options?: CallToolOptions): Promise<CallToolResult>;
  /** Aborts the scope's calls still in flight and closes its own sessions. Idempotent: later calls return the same promise. Never rejects. */
  close(): Promise<void>;
}

/** An open scope as the pool keeps it: `drain` is the pool's own close, which lets calls in flight finish. */
export interface OpenSessionScope {
  readonly scope: SessionScope;
  /** Closes the scope's idle sessions now and the busy ones when their call ends; refuses further calls. */
  drain(): Promise<void>;
}

/**
 * Opens a scope over the pool's upstreams. `onClosed` runs once its sessions are closed.
 * Internal to the session pool.
 */
export function openSessionScope(id: string, upstreamNamed: (name: string) => Upstream, onClosed: () => void): OpenSessionScope {
  // The calls in flight (the upstream adds each and removes it when it ends), so that closing cuts short only those.
  const inFlight = new Set<InFlightCall>();
  const held = new Map<string, ScopedSession>();
  let closing: Promise<void> | undefined;
  let ended: Promise<void> | undefined;
  const end = (): Promise<void> => {
    ended ??= Promise.allSettled([...held.values()].map((session) => session.end())).then(onClosed);
    return ended;
  };

  const callHeld = async (upstream: Upstream, toolName: string, args: Record<string, unknown>, options: CallToolOptions): Promise<CallToolResult> => {
    let session = held.get(upstream.name);
    if (session === undefined) held.set(upstream.name, (session = new ScopedSession(upstream, id)));
    const lostBefore = session.lost;
    try {
      return await upstream.callTool(toolName, args, options, session, inFlight);
    } catch (error) {
      if (session.lost === lostBefore || !isKlymError(error)) throw error;
      const message = `${error.message}. The scope "${id}" lost its session to upstream "${upstream.name}", and with it whatever state the upstream kept for it; the next call opens a fresh session`;
      throw new KlymError(error.code, message, { upstream: upstream.name, toolName, cause: error });
    }
  };

  const scope: SessionScope = {
    id,
    callTool(upstreamName, toolName, args = {}, options = {}) {
      if (closing !== undefined || ended !== undefined) {
        return Promise.reject(
          new KlymError('POOL_CLOSED', `The session scope "${id}" is closed; no call to ${upstreamName}/${toolName}`, { upstream: upstreamName, toolName }),
        );
      }
      let upstream: Upstream;
      try {
        upstream = upstreamNamed(upstreamName);
      } catch (error) {
        return Promise.reject(error);
      }
      return upstream.config.sessionScope === 'task'
        ? callHeld(upstream, toolName, args, options)
        : upstream.callTool(toolName, args, options, undefined, inFlight);
    },
    close() {
      closing ??= (async () => {
        // Made only when a call is cut: an error captures its stack when made, and most scopes close with none in flight.
        if (inFlight.size > 0) {
          const reason = new KlymError('ABORTED', `The session scope "${id}" closed`);
          for (const call of inFlight) call.abort(reason);
        }
        await end();
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => scope.close(),
  };
  return { scope, drain: end };
}

/**
 * A `task`-scoped upstream's session within one scope: taken from the upstream's pool on first use, kept
 * across the scope's calls, dropped (closed, never returned) when it breaks or the scope ends.
 */
class ScopedSession implements SessionSource {
  readonly #upstream: Upstream;
  readonly #scopeId: string;
  #session: UpstreamSession | undefined;
  /** The scope's calls to this upstream run one at a time, in order: they share one session's state. */
  #turn: Promise<void> = Promise.resolve();
  #endTurn: (() => void) | undefined;
  #ended = false;
  /** Sessions lost before the scope ended (broken, timed out, aborted): the upstream's state for the scope went with each. */
  lost = 0;

  constructor(upstream: Upstream, scopeId: string) {
    this.#upstream = upstream;
    this.#scopeId = scopeId;
  }

  async take(call: InFlightCall): Promise<UpstreamSession> {
    const previous = this.#turn;
    let endTurn!: () => void;
    this.#turn = new Promise((resolve) => (endTurn = resolve));
    try {
      await raceAbort(previous, call.signal);
    } catch (error) {
      // The calls queued behind this one still wait for the one before it.
      void previous.then(endTurn);
      throw error;
    }
    try {
      call.throwIfCut();
      if (this.#ended) {
        throw new KlymError('POOL_CLOSED', `The session scope "${this.#scopeId}" is closed; upstream "${this.#upstream.name}" takes no more of its calls`, {
          upstream: this.#upstream.name,
        });
      }
      // Sound and, when it sat idle long, answering a ping: the same test a pooled session passes before it is lent.
      if (this.#session !== undefined && !(await this.#upstream.checkSession(this.#session))) await this.#drop();
      this.#session ??= await this.#upstream.takeSession(call);
      this.#endTurn = endTurn;
      return this.#session;
    } catch (error) {
      endTurn();
      throw error;
    }
  }

  async put(session: UpstreamSession, sound: boolean): Promise<void> {
    const endTurn = this.#endTurn;
    this.#endTurn = undefined;
    try {
      if (sound && session.broken === undefined && !this.#ended) {
        session.idleSince = this.#upstream.clock.now();
        return;
      }
      await this.#drop();
    } finally {
      endTurn?.();
    }
  }

  /** Refuses further calls, waits for the one in flight (and those queued, which are refused), and closes the session. */
  async end(): Promise<void> {
    this.#ended = true;
    await this.#turn;
    await this.#drop();
  }

  async #drop(): Promise<void> {
    const session = this.#session;
    if (session === undefined) return;
    this.#session = undefined;
    if (!this.#ended) this.lost++;
    // Closed before its place in the pool is freed: the upstream never sees more than `pool.max` sessions, and
    // the scope's end means the upstream saw it close. One that fails to close leaves the pool all the same,
    // as generic-pool treats a failed destroy.
    await session.close().catch(() => {});
    await this.#upstream.dropSession(session);
  }
}
