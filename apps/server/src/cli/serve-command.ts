import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { createRedactor } from '@klym/core';
import { configSecrets, serverOptions } from '../config/core-options.ts';
import { LOG_LEVELS, type KlymConfig, type LogLevel } from '../config/schema.ts';
import { handleProcessFaults, serveStdio, startKlymServer, type ServerLog } from '../server/index.ts';
import { configFor, EXIT, type CliIo } from './cli.ts';
import type { CommandLine } from './parse-command.ts';

/**
 * Where the server's log lines go: stderr, or appended to the file `logging.destination` names; lines less
 * severe than `logging.level` are left out, and every line is scrubbed of the configuration's secrets.
 */
function logSink(config: KlymConfig, io: CliIo): { log: ServerLog; close: () => Promise<void> } {
  const scrub = createRedactor(configSecrets(config)).text;
  const least = LOG_LEVELS.indexOf(config.logging.level);
  const shown = (level: LogLevel = 'info'): boolean => LOG_LEVELS.indexOf(level) >= least;
  if (config.logging.destination === 'stderr') return { log: (line, level) => void (shown(level) && io.stderr.write(`${scrub(line)}\n`)), close: async () => {} };
  const stream = createWriteStream(path.resolve(io.cwd, config.logging.destination), { flags: 'a' });
  return {
    log: (line, level) => void (shown(level) && stream.write(`${new Date().toISOString()} ${scrub(line)}\n`)),
    close: () => new Promise((resolve) => stream.end(() => resolve())),
  };
}

const upstreamNames = (config: KlymConfig): string => Object.keys(config.upstreams).join(', ') || 'none';

/** Resolves when `signal` aborts (at once if it already has); never, without a signal. */
const aborted = (signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });

/**
 * `klym serve`: Klym's MCP server, built from the layered configuration, until `io.signal` aborts
 * (SIGINT/SIGTERM), then shut down gracefully. `--stdio` serves one client over stdin/stdout, until
 * it closes stdin. While it serves, an unhandled rejection is logged and serving goes on, and an uncaught
 * exception is logged and shuts the server down gracefully (see `handleProcessFaults`). Resolves with the
 * exit status: 0, or 2 after an uncaught exception.
 */
export async function serveCommand(parsed: CommandLine, io: CliIo): Promise<number> {
  const { config, file } = configFor(parsed, io);
  const sink = logSink(config, io);
  const options = { ...serverOptions(config, io.cwd), log: sink.log };
  const fault = new AbortController();
  const stopHandling = handleProcessFaults({ log: sink.log, secrets: configSecrets(config), shutdown: () => fault.abort() });
  const stopped = Promise.race([aborted(io.signal), aborted(fault.signal)]);
  const status = (): number => (fault.signal.aborted ? EXIT.failure : EXIT.ok);
  try {
    if (parsed.stdio) {
      // stdout carries MCP messages only; everything else goes to the log.
      const stdio = await serveStdio(options, { ...(io.stdin === undefined ? {} : { stdin: io.stdin }), stdout: io.stdout as unknown as NodeJS.WritableStream });
      sink.log(`klym: serving MCP over stdio${file === undefined ? '' : ` (config ${file})`}; upstreams: ${upstreamNames(config)}`);
      await Promise.race([stdio.closed, stopped]);
      await stdio.close();
      return status();
    }
    const server = await startKlymServer(options);
    io.stdout.write(
      `Klym is serving MCP at ${server.mcpUrl} (Streamable HTTP) and ${server.sseUrl} (legacy SSE)\n` +
        `  REST: ${server.url}/api/tasks · health: ${server.url}/healthz · upstreams: ${upstreamNames(config)} · model: ${config.llm.model}\n`,
    );
    await stopped;
    sink.log('klym: shutting down (running tasks get a grace period, then are cancelled)');
    await server.close();
    return status();
  } finally {
    stopHandling();
    await sink.close();
  }
}
