import type { Readable } from 'node:stream';
import {
  Client,
  SdkErrorCode,
  SdkHttpError,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type AuthProvider,
  type FetchLike,
  type LoggingLevel,
  type PriorDiscovery,
  type Transport,
  type VersionNegotiationOptions,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { KlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import { replaceStdioReadBuffer } from '../internal/sdk-handlers.ts';
import type { PoolClock } from './clock.ts';
import { messageLimit } from './message-limit.ts';
import { StdioFrameReader } from './stdio-frame-reader.ts';
import type { ResolvedUpstreamConfig, TransportKind } from './upstream-config.ts';
import { readStderr, type StderrCounts } from './upstream-stderr.ts';

/** A message an upstream logged: a `notifications/message`, or a line a stdio server wrote to stderr. */
export interface UpstreamLogEntry {
  readonly upstream: string;
  readonly source: 'notification' | 'stderr';
  readonly level: LoggingLevel;
  readonly message: string;
  /** The notification's `logger` field, where it had one. */
  readonly logger?: string;
}

/** One open MCP client session to an upstream. */
export interface UpstreamSession {
  /** Counts up from 1 per upstream. */
  readonly id: number;
  readonly client: Client;
  /** The transport actually in use (`auto` resolved). */
  readonly transport: TransportKind;
  /**
   * The protocol revision the connect settled on: `2026-07-28` (stateless: `server/discover`, no session
   * on the upstream), or the one `initialize` agreed on (`2025-11-25` and older).
   */
  readonly protocolVersion: string;
  /** What the connect learnt of the upstream's era, for later connects to skip the probe. */
  readonly verdict: PriorDiscovery;
  /**
   * Set at the first sign of breakage (a client or transport error, the connection closing). The session
   * is then closed at once, which fails its calls in flight; it is never lent again.
   */
  readonly broken: Error | undefined;
  /** Marks the session broken (its state is in doubt) and closes it. */
  breakOff(reason: Error): void;
  /**
   * Sends the upstream `notifications/cancelled` for the request this session sent last — the call it is
   * lent for, since it serves one at a time — as the SDK does for a request whose signal aborts. The session
   * is then to be closed (its state is in doubt), which ends the SDK's wait for the answer.
   */
  cancelRequest(reason: unknown): void;
  /** Whoever borrowed the session also receives what the upstream logs meanwhile. */
  borrowerLog: ((entry: UpstreamLogEntry) => void) | undefined;
  /** When it last went back to the pool (on the pool's clock); `undefined` until it has been lent once. */
  idleSince: number | undefined;
  /**
   * Ends the session, once: lets messages being sent (a `notifications/cancelled`) go out first, then
   * terminates a Streamable HTTP session, closes an SSE stream, reaps a stdio child.
   */
  close(): Promise<void>;
}

/** What a new session reports to its upstream. */
export interface SessionHooks {
  readonly fetch: FetchLike;
  readonly clientInfo: { readonly name: string; readonly version: string };
  /** The pool's clock: the connect's time limit, and the rate at which stderr lines are handed on. */
  readonly clock: PoolClock;
  /** Where a stdio session counts what its server wrote to stderr, and what of it was dropped. */
  readonly stderr: StderrCounts;
  /** Sends an HTTP upstream's requests with an OAuth access token (`upstreams.<name>.auth`), one provider for every session. */
  readonly authProvider: AuthProvider | undefined;
  /** What an earlier session learnt of the upstream's era: `connect` then skips the `server/discover` probe. */
  readonly verdict: PriorDiscovery | undefined;
  onLog(entry: UpstreamLogEntry): void;
  onToolsChanged(): void;
  /** The session broke (it closes itself): `byUpstream` when its transport failed or closed, not by `breakOff`. */
  onBroken(session: UpstreamSession, reason: Error, byUpstream: boolean): void;
}

/**
 * Opens a session: connects the transport and settles the protocol revision (`server/discover`, else
 * `initialize`; see {@link versionNegotiation}), all within `config.connectMs`. `transport` is the kind
 * to use (`auto` probes Streamable HTTP, then legacy SSE on a 4xx).
 * @throws {KlymError} `UPSTREAM_UNAVAILABLE` naming the upstream and the cause, or `ABORTED`.
 */
export async function openSession(
  config: ResolvedUpstreamConfig,
  transport: ResolvedUpstreamConfig['transport'],
  id: number,
  hooks: SessionHooks,
  signal?: AbortSignal,
): Promise<UpstreamSession> {
  if (transport === 'auto') {
    try {
      return await openSession(config, 'streamable-http', id, hooks, signal);
    } catch (error) {
      const status = error instanceof KlymError && error.cause instanceof SdkHttpError ? error.cause.status : undefined;
      if (status === undefined || status < 400 || status >= 500) throw error;
      return await openSession(config, 'sse', id, hooks, signal);
    }
  }

  const client = new Client(hooks.clientInfo, {
    capabilities: {},
    versionNegotiation: versionNegotiation(config, transport),
    // A 2026-07-28 server tells of a changed tool list only on a `subscriptions/listen` stream, which the SDK
    // opens for this at connect; a 2025 server's notification reaches the same callback (or the handler below).
    listChanged: { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => hooks.onToolsChanged() } },
  });
  const sending = new Set<Promise<void>>();
  const sent: { requestId?: string | number } = {};
  let broken: Error | undefined;
  let closing: Promise<void> | undefined;
  let connected = false;
  const markBroken = (reason: Error, byUpstream: boolean): void => {
    if (broken !== undefined || closing !== undefined) return;
    broken = reason;
    // A session that never finished connecting is reported by the connect's own failure.
    if (connected) hooks.onBroken(session, reason, byUpstream);
    void session.close().catch(() => {});
  };
  const session: UpstreamSession = {
    id,
    client,
    transport,
    get protocolVersion() {
      return client.getNegotiatedProtocolVersion() ?? 'unknown';
    },
    get verdict(): PriorDiscovery {
      const discover = client.getDiscoverResult();
      return discover === undefined ? { kind: 'legacy' } : { kind: 'modern', discover };
    },
    get broken() {
      return broken;
    },
    breakOff: (reason) => markBroken(reason, false),
    cancelRequest(reason) {
      const { requestId } = sent;
      if (requestId === undefined || closing !== undefined) return;
      sent.requestId = undefined;
      // 2026-07-28 cancels a request by closing its response stream, which closing the session does.
      if (client.getProtocolEra() === 'modern') return;
      client.notification({ method: 'notifications/cancelled', params: { requestId, reason: String(reason) } }).catch(() => {});
    },
    borrowerLog: undefined,
    idleSince: undefined,
    close() {
      closing ??= closeSession(client, transport, sending);
      return closing;
    },
  };
  // Neither transport reports a dead upstream through onclose; onerror fires within milliseconds.
  client.onerror = (error) => {
    // The GET stream is optional (for what a server sends unasked); a server without one should answer 405,
    // which the SDK takes in its stride, but some answer 404. Calls go on over POST; only that stream is lost.
    if (error instanceof SdkHttpError && error.status === 404 && error.code === SdkErrorCode.ClientHttpFailedToOpenStream) {
      hooks.onLog({
        upstream: config.name,
        source: 'notification',
        level: 'warning',
        message: 'it offers no GET stream (HTTP 404 instead of 405): what it would send unasked there is not received; calls go on',
      });
      return;
    }
    markBroken(error, true);
  };
  client.onclose = () => markBroken(new Error('the connection closed'), true);
  const log = (entry: UpstreamLogEntry): void => {
    hooks.onLog(entry);
    session.borrowerLog?.(entry);
  };
  client.setNotificationHandler('notifications/message', ({ params }) => {
    const message = typeof params.data === 'string' ? params.data : JSON.stringify(params.data);
    log({ upstream: config.name, source: 'notification', level: params.level, message, ...(params.logger === undefined ? {} : { logger: params.logger }) });
  });
  client.setNotificationHandler('notifications/tools/list_changed', () => hooks.onToolsChanged());

  // The connect has a signal of its own, never `signal` itself nor one that outlives the connect: the SDK
  // never removes the abort listener it adds for `initialize`, and a signal aborted later (a connect timer
  // that fires anyway, the pool closing) would send the upstream a cancellation of a request it answered.
  const connecting = new AbortController();
  let timedOut = false;
  const timer = hooks.clock.setTimeout(() => {
    timedOut = true;
    connecting.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, config.connectMs);
  const stop = (): void => connecting.abort(signal?.reason);
  if (signal?.aborted) stop();
  else signal?.addEventListener('abort', stop, { once: true });
  let opened: Transport | undefined;
  try {
    opened = trackSends(createTransport(config, transport, hooks, log, sent), sending, sent);
    const prior = transport === 'sse' ? undefined : hooks.verdict;
    await raceAbort(
      client.connect(opened, { timeout: config.connectMs, signal: connecting.signal, ...(prior === undefined ? {} : { prior }) }),
      connecting.signal,
    );
    // A connect from a remembered verdict opens no `subscriptions/listen` stream by itself: open it here. It
    // carries the tool list's changes, and its end is what tells an idle stateless session its upstream went.
    if (prior?.kind === 'modern' && client.getServerCapabilities()?.tools?.listChanged === true) {
      const subscription = await raceAbort(
        client.listen({ toolsListChanged: true }, { timeout: config.connectMs, signal: connecting.signal }),
        connecting.signal,
      );
      void subscription.closed.then((how) => {
        if (how !== 'local') markBroken(new Error('its subscriptions/listen stream ended'), true);
      });
    }
    connected = true;
    if (broken !== undefined) throw broken;
    return session;
  } catch (error) {
    // The era probe runs before the client holds the transport: closing the client alone would leave it open.
    await Promise.allSettled([client.close(), opened?.close()]);
    if (signal?.aborted) throw new KlymError('ABORTED', `Connecting to upstream "${config.name}" was aborted`, { upstream: config.name, cause: signal.reason });
    const reason = timedOut ? `timed out after ${config.connectMs} ms` : describe(error);
    throw new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${config.name}" is unavailable: connect over ${transport} failed: ${reason}`, {
      upstream: config.name,
      cause: error,
    });
  } finally {
    hooks.clock.clearTimeout(timer);
    signal?.removeEventListener('abort', stop);
  }
}

function createTransport(
  config: ResolvedUpstreamConfig,
  kind: TransportKind,
  hooks: SessionHooks,
  log: (entry: UpstreamLogEntry) => void,
  sent: { readonly requestId?: string | number },
): Transport {
  switch (kind) {
    case 'custom':
      return lazyTransport(config);
    case 'stdio': {
      const transport = new StdioClientTransport({
        command: config.command ?? '',
        args: [...config.args],
        env: { ...config.env },
        ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
        stderr: 'pipe',
        // The SDK's own limit, should its read buffer below ever not be replaced: past it, the session is lost.
        maxBufferSize: config.maxMessageBytes,
      });
      // A session serves one call at a time: an answer over the limit whose id cannot be read answers the last request.
      const reader = new StdioFrameReader(messageLimit(config, log), () => (sent.requestId === undefined ? [] : [sent.requestId]));
      // A private field of the SDK's: the reach checks it is there, and throws naming the SDK's version if not;
      // test/pool-big-messages.test.ts fails should an SDK update stop using it.
      replaceStdioReadBuffer(transport, reader);
      if (transport.stderr !== null) readStderr(transport.stderr as Readable, config.name, log, hooks.stderr, hooks.clock);
      return transport;
    }
    case 'sse':
    case 'streamable-http': {
      const url = config.url as URL;
      const headers = Object.fromEntries(Object.entries(config.headers).filter(([key]) => key.toLowerCase() !== 'host'));
      const auth = hooks.authProvider === undefined ? {} : { authProvider: hooks.authProvider };
      return kind === 'sse'
        ? new SSEClientTransport(url, { fetch: hooks.fetch, requestInit: { headers }, ...auth })
        : new StreamableHTTPClientTransport(url, { fetch: hooks.fetch, requestInit: { headers }, ...auth });
    }
  }
}

/** Defers a custom `connect()` to the transport's `start()`, so a slow or failing one counts as a connect failure. */
function lazyTransport(config: ResolvedUpstreamConfig): Transport {
  let inner: Transport | undefined;
  const outer: Transport = {
    async start() {
      inner = await (config.connect as () => Transport | Promise<Transport>)();
      inner.onmessage = (message, extra) => outer.onmessage?.(message, extra);
      inner.onerror = (error) => outer.onerror?.(error);
      inner.onclose = () => outer.onclose?.();
      await inner.start();
    },
    send: (message, options) => (inner ? inner.send(message, options) : Promise.reject(new Error('transport not started'))),
    close: async () => inner?.close(),
  };
  return outer;
}

/**
 * Keeps every notification being sent in `sending` until it is out, so that closing can wait for them, and
 * the id of the last request in `last`, so that it can be cancelled. (A request's send may last until its
 * answer: a 2026-07-28 server may hold the POST's response until it has one.)
 */
function trackSends(transport: Transport, sending: Set<Promise<void>>, last: { requestId?: string | number }): Transport {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if ('method' in message && 'id' in message) last.requestId = message.id;
    const sent = send(message, options);
    if (!('method' in message) || 'id' in message) return sent;
    sending.add(sent);
    const done = (): void => void sending.delete(sent);
    sent.then(done, done);
    return sent;
  };
  return transport;
}

async function closeSession(client: Client, kind: TransportKind, sending: ReadonlySet<Promise<void>>): Promise<void> {
  // A `notifications/cancelled` sent as a call was aborted must reach the upstream before the stream goes.
  await raceAbort(Promise.allSettled(sending), AbortSignal.timeout(1_000)).catch(() => {});
  const transport = client.transport;
  if (kind === 'streamable-http' && transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    // close() alone sends no DELETE: the server would keep the session until it expires.
    await raceAbort(transport.terminateSession(), AbortSignal.timeout(2000)).catch(() => {});
  }
  await client.close();
}

/**
 * How a session's connect settles the era. `auto` probes with `server/discover` and falls back to
 * `initialize` on a 2025 server (one round trip more, once per upstream: later connects reuse the
 * verdict); over legacy SSE, which 2026-07-28 has no use for, and with `protocol: '2025-11-25'`, it is
 * `initialize` alone; a pinned `2026-07-28` never falls back.
 */
function versionNegotiation(config: ResolvedUpstreamConfig, transport: TransportKind): VersionNegotiationOptions {
  if (transport === 'sse' || config.protocol === '2025-11-25') return { mode: 'legacy' };
  if (config.protocol === '2026-07-28') return { mode: { pin: '2026-07-28' } };
  // On stdio the SDK probes on a sibling process; a server that ignores the probe would otherwise hold the connect to its end.
  return { mode: 'auto', probe: { timeoutMs: transport === 'stdio' ? Math.min(2_000, Math.ceil(config.connectMs / 2)) : config.connectMs } };
}

function describe(error: unknown): string {
  if (error instanceof SdkHttpError && !error.message.includes(String(error.status))) return `${error.message} (HTTP ${error.status})`;
  return error instanceof Error ? error.message : String(error);
}
