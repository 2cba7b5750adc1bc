import type { TaskService } from '@klym/core';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { connectKlymMcpServer } from './mcp-server.ts';
import { openTasks } from './open-tasks.ts';
import { resolveServerOptions, type KlymServerOptions } from './server-options.ts';

/** Klym served over stdio (`klym serve --stdio`). */
export interface StdioKlym extends AsyncDisposable {
  readonly service: TaskService;
  /** Resolves when the client closes stdin (or `close()` ran). */
  readonly closed: Promise<void>;
  /** Cancels tasks after the grace period, closes the session, then the pool and the task store. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves the task tools to one client over stdin/stdout. Every caller is `anonymous` (the client owns
 * the process). Nothing but MCP messages goes to stdout; logs go to stderr.
 *
 * @throws {KlymError} `CONFIG_INVALID` when an option is wrong; `STORE_UNAVAILABLE` when the task store cannot be opened.
 */
export async function serveStdio(
  options: KlymServerOptions,
  streams: { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {},
): Promise<StdioKlym> {
  const tasks = await openTasks(resolveServerOptions(options));
  const { service } = tasks;
  const transport = new StdioServerTransport(streams.stdin as never, streams.stdout as never);
  const server = await connectKlymMcpServer(service, transport);
  let closing: Promise<void> | undefined;
  const { promise: closed, resolve: ended } = Promise.withResolvers<void>();
  const close = (): Promise<void> => {
    closing ??= (async () => {
      try {
        await service.close();
        await server.close().catch(() => {
          // The client may be gone already: there is no session left to close.
        });
      } finally {
        await tasks.close();
        ended();
      }
    })();
    return closing;
  };
  (streams.stdin ?? process.stdin).once('end', () => void close());
  return { service, closed, close, [Symbol.asyncDispose]: close };
}
