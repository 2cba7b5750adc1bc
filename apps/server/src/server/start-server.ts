import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { KlymError } from '@klym/core';
import { createKlymApp, type KlymApp } from './app.ts';
import { SERVER_DEFAULTS, isLoopback, type KlymServerOptions } from './server-options.ts';

/** A listening Klym server. */
export interface RunningKlymServer extends AsyncDisposable {
  /** `http://<host>:<port>` */
  readonly url: string;
  /** Streamable HTTP endpoint: `<url>/mcp`. */
  readonly mcpUrl: string;
  /** Legacy SSE endpoint: `<url>/sse`. */
  readonly sseUrl: string;
  readonly port: number;
  readonly klym: KlymApp;
  /**
   * Graceful shutdown: refuses new MCP sessions and new tasks (503), gives running tasks `shutdownGraceMs`
   * while every request on old or new connections is still served, cancels the rest with the reason
   * "shutdown", closes MCP sessions, the pool and the task store, then the listener and its connections.
   * Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Builds the app and listens on `options.host` (default `127.0.0.1`) and `options.port` (default 8765).
 *
 * @throws {KlymError} `CONFIG_INVALID` when binding a non-loopback address without `auth.tokens` or `auth.oauth`.
 * @example
 * ```ts
 * await using server = await startKlymServer({ port: 0, upstreams: { grynya: { url: 'http://127.0.0.1:8000/sse' } } })
 * console.log(server.mcpUrl)
 * ```
 */
export async function startKlymServer(options: KlymServerOptions): Promise<RunningKlymServer> {
  const host = options.host ?? SERVER_DEFAULTS.host;
  if (!isLoopback(host) && Object.keys(options.auth?.tokens ?? {}).length === 0 && options.auth?.oauth === undefined) {
    throw new KlymError('CONFIG_INVALID', `Klym refuses to bind the non-loopback address "${host}" without auth (auth.tokens or auth.oauth)`);
  }
  const klym = await createKlymApp(options);
  const server = serve({ fetch: klym.app.fetch, hostname: host, port: options.port ?? SERVER_DEFAULTS.port });
  try {
    if (!server.listening) await once(server, 'listening');
  } catch (error) {
    await klym.close();
    throw new KlymError('CONFIG_INVALID', `Klym could not listen on ${host}:${options.port ?? SERVER_DEFAULTS.port}`, { cause: error });
  }
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;
  const running: RunningKlymServer = {
    url,
    mcpUrl: `${url}/mcp`,
    sseUrl: `${url}/sse`,
    port,
    klym,
    close() {
      closing ??= (async () => {
        try {
          // The listener stays open until the tasks have ended: through the grace period any connection, opened
          // before the shutdown or after it (a client's pool reconnects, a legacy SSE client posts on a second
          // one), can poll and cancel; new MCP sessions and new tasks are refused with 503.
          await klym.close();
        } finally {
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          if ('closeAllConnections' in server) server.closeAllConnections();
          await closed;
        }
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => running.close(),
  };
  return running;
}

/** Options of {@link handleShutdownSignals}. */
export interface ShutdownSignalOptions {
  /** @default ['SIGINT', 'SIGTERM'] */
  readonly signals?: readonly NodeJS.Signals[];
  /** Ends the process. @default process.exit */
  readonly exit?: (code: number) => void;
  /** @default writes to stderr */
  readonly log?: (line: string) => void;
}

/**
 * Hooks graceful shutdown to SIGINT/SIGTERM: the first signal closes `target` and exits 0 (1 if closing
 * failed); a second signal exits 1 at once. Returns a function that removes the handlers.
 */
export function handleShutdownSignals(target: { close(): Promise<void> }, options: ShutdownSignalOptions = {}): () => void {
  const signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let shuttingDown = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (shuttingDown) {
      log(`klym: ${signal} again; exiting now`);
      exit(1);
      return;
    }
    shuttingDown = true;
    log(`klym: ${signal}; shutting down (running tasks get a grace period, then are cancelled)`);
    target.close().then(
      () => exit(0),
      (error: unknown) => {
        log(`klym: shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        exit(1);
      },
    );
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
