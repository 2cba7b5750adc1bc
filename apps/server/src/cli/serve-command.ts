import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { createRedactor } from '@klym/core';
import { configSecrets, serverOptions } from '../config/core-options.ts';
import type { KlymConfig } from '../config/schema.ts';
import { serveStdio, startKlymServer } from '../server/index.ts';
import { configFor, EXIT, type CliIo } from './cli.ts';
import type { CommandLine } from './parse-command.ts';

/** Where the server's log lines go: stderr, or appended to the file `logging.destination` names. */
function logSink(config: KlymConfig, io: CliIo): { log: (line: string) => void; close: () => Promise<void> } {
  const scrub = createRedactor(configSecrets(config)).text;
  if (config.logging.destination === 'stderr') return { log: (line) => void io.stderr.write(`${scrub(line)}\n`), close: async () => {} };
  const stream = createWriteStream(path.resolve(io.cwd, config.logging.destination), { flags: 'a' });
  return {
    log: (line) => void stream.write(`${new Date().toISOString()} ${scrub(line)}\n`),
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
 * it closes stdin. Resolves with the exit status.
 */
export async function serveCommand(parsed: CommandLine, io: CliIo): Promise<number> {
  const { config, file } = configFor(parsed, io);
  const sink = logSink(config, io);
  const options = { ...serverOptions(config, io.cwd), log: sink.log };
  try {
    if (parsed.stdio) {
      // stdout carries MCP messages only; everything else goes to the log.
      const stdio = await serveStdio(options, { ...(io.stdin === undefined ? {} : { stdin: io.stdin }), stdout: io.stdout as unknown as NodeJS.WritableStream });
      sink.log(`klym: serving MCP over stdio${file === undefined ? '' : ` (config ${file})`}; upstreams: ${upstreamNames(config)}`);
      await Promise.race([stdio.closed, aborted(io.signal)]);
      await stdio.close();
      return EXIT.ok;
    }
    const server = await startKlymServer(options);
    io.stdout.write(
      `Klym is serving MCP at ${server.mcpUrl} (Streamable HTTP) and ${server.sseUrl} (legacy SSE)\n` +
        `  REST: ${server.url}/api/tasks · health: ${server.url}/healthz · upstreams: ${upstreamNames(config)} · model: ${config.llm.model}\n`,
    );
    await aborted(io.signal);
    sink.log('klym: shutting down (running tasks get a grace period, then are cancelled)');
    await server.close();
    return EXIT.ok;
  } finally {
    await sink.close();
  }
}
