import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { createRedactor } from '@klym/core/server';
import { pino } from 'pino';
import { configSecrets } from '../config/core-options.ts';
import type { KlymConfig, LogLevel } from '../config/schema.ts';
import type { ServerLog } from '../server/index.ts';
import type { CliIo, TextSink } from './cli.ts';
import { prettyLine } from './pretty-log.ts';

/** MCP's levels as pino's numbers: pino's own where they share a name, the others between them. */
const LEVEL_VALUES: Readonly<Record<LogLevel, number>> = { debug: 20, info: 30, notice: 35, warning: 40, error: 50, critical: 60, alert: 70, emergency: 80 };

/** A pino destination that turns each JSON line into the readable one (no transport thread: a terminal is slow anyway). */
const prettyDestination = (sink: TextSink): { write(line: string): void } => ({ write: (line) => void sink.write(prettyLine(line)) });

/**
 * Where the server's log lines go, with pino: stderr, or appended to the file `logging.destination` names.
 * Each line is JSON (`{"level":"info","time":"…","msg":"…", …fields}`), or readable text
 * (`logging.format: pretty`, and `auto` when the destination is stderr on a terminal); lines less severe
 * than `logging.level` are left out, and every message and field is scrubbed of the configuration's secrets.
 */
export function logSink(config: KlymConfig, io: CliIo): { log: ServerLog; close: () => Promise<void> } {
  const redactor = createRedactor(configSecrets(config));
  const toFile = config.logging.destination !== 'stderr';
  const file = toFile ? createWriteStream(path.resolve(io.cwd, config.logging.destination), { flags: 'a' }) : undefined;
  const sink: TextSink = file ?? io.stderr;
  const pretty = config.logging.format === 'pretty' || (config.logging.format === 'auto' && !toFile && io.stderr.isTTY === true);
  const logger = pino<LogLevel, true>(
    {
      level: config.logging.level,
      customLevels: LEVEL_VALUES,
      useOnlyCustomLevels: true,
      // The process is its own: no pid or hostname on every line.
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pretty ? prettyDestination(sink) : { write: (line: string) => void sink.write(line) },
  );
  return {
    log: (line, level = 'info', fields) => {
      if (!logger.isLevelEnabled(level)) return;
      logger[level](fields === undefined ? {} : redactor.value(fields), redactor.text(line));
    },
    close: async () => {
      if (file !== undefined) await new Promise<void>((resolve) => file.end(() => resolve()));
    },
  };
}

export const upstreamNames = (config: KlymConfig): string => Object.keys(config.upstreams).join(', ') || 'none';

/** Resolves when `signal` aborts (at once if it already has); never, without a signal. */
export const aborted = (signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
