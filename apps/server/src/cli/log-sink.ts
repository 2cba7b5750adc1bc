import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { createRedactor } from '@klym/core';
import { configSecrets } from '../config/core-options.ts';
import { LOG_LEVELS, type KlymConfig, type LogLevel } from '../config/schema.ts';
import type { ServerLog } from '../server/index.ts';
import type { CliIo } from './cli.ts';

/**
 * Where the server's log lines go: stderr, or appended to the file `logging.destination` names; lines less
 * severe than `logging.level` are left out, and every line is scrubbed of the configuration's secrets.
 */
export function logSink(config: KlymConfig, io: CliIo): { log: ServerLog; close: () => Promise<void> } {
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

export const upstreamNames = (config: KlymConfig): string => Object.keys(config.upstreams).join(', ') || 'none';

/** Resolves when `signal` aborts (at once if it already has); never, without a signal. */
export const aborted = (signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
