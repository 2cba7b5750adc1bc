import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createKlymService, type KlymService } from './klym-service.ts';
import { createKlymMcpServer } from './mcp-server.ts';
import type { KlymServerOptions } from './server-options.ts';

/** Klym served over stdio (`klym serve --stdio`). */
export interface StdioKlym extends AsyncDisposable {
  readonly service: KlymService;
  /** Resolves when the client closes stdin (or `close()` ran). */
  readonly closed: Promise<void>;
  /** Cancels tasks after the grace period, closes the session and the pool. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves the task tools to one client over stdin/stdout. Every caller is `anonymous` (the client owns
 * the process). Nothing but MCP messages goes to stdout; logs go to stderr.
 */
export async function serveStdio(options: KlymServerOptions, streams: { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {}): Promise<StdioKlym> {
  const service = await createKlymService(options);
  const server = createKlymMcpServer(service);
  const transport = new StdioServerTransport(streams.stdin as never, streams.stdout as never);
  let closing: Promise<void> | undefined;
  const { promise: closed, resolve: ended } = Promise.withResolvers<void>();
  const close = (): Promise<void> => {
    closing ??= (async () => {
      try {
        await service.tasks.close({ graceMs: service.options.shutdownGraceMs, reason: 'shutdown' });
        await server.close().catch(() => {});
        await service.close();
      } finally {
        ended();
      }
    })();
    return closing;
  };
  await server.connect(transport);
  (streams.stdin ?? process.stdin).once('end', () => void close());
  return { service, closed, close, [Symbol.asyncDispose]: close };
}
