import { serveStdio, startKlymServer } from '../server/index.ts';
import type { CliIo } from './cli.ts';
import { upstreamNames } from './log-sink.ts';
import type { CommandLine } from './parse-command.ts';
import { openServerProcess } from './server-process.ts';

/**
 * `klym serve`: Klym's MCP server, built from the layered configuration, until `io.signal` aborts
 * (SIGINT/SIGTERM), then shut down gracefully. `--stdio` serves one client over stdin/stdout, until
 * it closes stdin. While it serves, an unhandled rejection is logged and serving goes on, and an uncaught
 * exception is logged and shuts the server down gracefully (see `handleProcessFaults`). Resolves with the
 * exit status: 0, or 2 after an uncaught exception.
 */
export async function serveCommand(parsed: CommandLine, io: CliIo): Promise<number> {
  const { config, file, options, stopped, status, close } = await openServerProcess(parsed, io);
  try {
    if (parsed.stdio) {
      // stdout carries MCP messages only; everything else goes to the log.
      const stdio = await serveStdio(options, {
        ...(io.stdin === undefined ? {} : { stdin: io.stdin }),
        stdout: io.stdout as unknown as NodeJS.WritableStream,
      });
      options.log(`klym: serving MCP over stdio${file === undefined ? '' : ` (config ${file})`}; upstreams: ${upstreamNames(config)}`);
      await Promise.race([stdio.closed, stopped]);
      await stdio.close();
      return status();
    }
    const server = await startKlymServer(options);
    io.stdout.write(
      `Klym is serving MCP at ${server.mcpUrl} (Streamable HTTP) and ${server.sseUrl} (legacy SSE)\n` +
        `  REST: ${server.url}/api/tasks · health: ${server.url}/healthz · upstreams: ${upstreamNames(config)} · model: ${config.llm.model}\n` +
        (config.tasks.concurrency === 0 ? '  a front only (tasks.concurrency 0): `klym worker` processes on the same Redis run the tasks\n' : ''),
    );
    await stopped;
    const shared = /^rediss?:\/\//.test(config.tasks.store);
    options.log(`klym: shutting down (running tasks get a grace period, then ${shared ? 'go back to the queue for a worker' : 'are cancelled'})`);
    await server.close();
    return status();
  } finally {
    await close();
  }
}
