import { isKlymError } from '@klym/core';
import { formatConfigJson, formatConfigYaml } from '../config/format-config.ts';
import { resolveConfig, type ResolvedConfig } from '../config/resolve-config.ts';
import { helpText } from './help.ts';
import { parseCommand, type CommandLine } from './parse-command.ts';

/** Something text is written to: `process.stdout`, `process.stderr`, or a test's buffer. */
export interface TextSink {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/** What the CLI reads and writes, passed in so that it can run inside a test. */
export interface CliIo {
  readonly stdout: TextSink;
  readonly stderr: TextSink;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** What `klym serve --stdio` reads MCP messages from. @default process.stdin */
  readonly stdin?: NodeJS.ReadableStream;
  /** Aborts on SIGINT/SIGTERM: `klym run` cancels its run, `klym serve` shuts down. */
  readonly signal?: AbortSignal;
}

/** Exit statuses of `klym`. */
export const EXIT = { ok: 0, usage: 1, failure: 2, interrupted: 130 } as const;

/**
 * Errors that are the user's to fix (exit 1): configuration, arguments, a task store that cannot be
 * opened (a path, a permission, another Klym holding it); everything else is a failure of Klym, an
 * upstream or the model (exit 2).
 */
export function exitCodeOf(error: unknown): number {
  return isKlymError(error, 'CONFIG_INVALID', 'INVALID_ARGUMENT', 'STORE_UNAVAILABLE') ? EXIT.usage : EXIT.failure;
}

/** One line on stderr: `klym: <why>`, never a stack trace for a known error. */
export function reportError(io: CliIo, error: unknown): void {
  const message = isKlymError(error) ? error.message : `internal error: ${error instanceof Error ? error.message : String(error)}`;
  io.stderr.write(`klym: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
}

/** Resolves the configuration a command line asks for. @throws {KlymError} `CONFIG_INVALID` */
export function configFor(parsed: CommandLine, io: CliIo): ResolvedConfig {
  return resolveConfig({ cwd: io.cwd, env: io.env, configFile: parsed.configFile, flags: parsed.assignments });
}

/**
 * Runs `klym` with `argv` (without `node` and the script) and resolves with the exit status: 0 done,
 * 1 a usage or configuration error, 2 an internal, upstream or model failure, 130 interrupted.
 * Errors are reported on stderr as one line.
 *
 * @example
 * ```ts
 * process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() })
 * ```
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const parsed = parseCommand(argv);
    switch (parsed.command) {
      case 'help':
        io.stdout.write(helpText(parsed.topic));
        return EXIT.ok;
      case 'config': {
        const resolved = configFor(parsed, io);
        io.stdout.write(parsed.json ? formatConfigJson(resolved) : formatConfigYaml(resolved));
        return EXIT.ok;
      }
      case 'run': {
        // Loaded on demand: `klym config` and `--help` stay fast and need no model code.
        const { runCommand } = await import('./run-command.ts');
        return await runCommand(parsed, io);
      }
      case 'serve': {
        const { serveCommand } = await import('./serve-command.ts');
        return await serveCommand(parsed, io);
      }
      case 'worker': {
        const { workerCommand } = await import('./worker-command.ts');
        return await workerCommand(parsed, io);
      }
    }
  } catch (error) {
    reportError(io, error);
    return exitCodeOf(error);
  }
}
