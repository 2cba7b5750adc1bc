import { createRedactor } from '@klym/core/server';
import type { ServerLog } from './server-options.ts';

/** Options of {@link handleProcessFaults}. */
export interface ProcessFaultOptions {
  /** Where a fault is reported, as one line: `error` for a rejection, `critical` for an exception. */
  readonly log: ServerLog;
  /** Secrets to scrub from that line besides anything shaped like one (tokens, provider keys). @default [] */
  readonly secrets?: readonly string[];
  /** Begins the graceful shutdown after an uncaught exception; whoever owns the process then exits non-zero. */
  readonly shutdown: () => void;
  /** Ends the process at once: a second uncaught exception while shutting down. @default process.exit */
  readonly exit?: (code: number) => void;
}

/** A fault in one line: the error's name and message, and where it was thrown (the top frame of its stack). */
function describeFault(fault: unknown): string {
  if (!(fault instanceof Error)) return `a non-Error value: ${String(fault).slice(0, 500)}`;
  const frame = fault.stack
    ?.split('\n')
    .find((line) => line.trimStart().startsWith('at '))
    ?.trim();
  return `${fault.name}: ${fault.message}${frame === undefined ? '' : ` (${frame})`}`.replace(/\s*\n\s*/g, ' ');
}

/**
 * The process's safety net, installed by whoever owns the process (`klym serve`, `pnpm start`); Node's own
 * answer to either fault is to print a stack trace and die, taking every running task with it.
 *
 * - An **unhandled rejection** is logged and serving goes on: a promise nobody awaited failed, but no code
 *   was cut off half-way by it, so what the process holds is as consistent as before.
 * - An **uncaught exception** is logged and begins the graceful shutdown (`shutdown`): a throw that unwound a
 *   stack nobody expected may have left state half-changed, so the process stops taking work, lets running
 *   tasks have their grace period, and exits non-zero for its supervisor to restart it. A second one while
 *   shutting down exits at once (code 2).
 *
 * Every line is redacted (`secrets`, and anything shaped like a secret). Returns a function that removes the handlers.
 */
export function handleProcessFaults(options: ProcessFaultOptions): () => void {
  const scrub = createRedactor(options.secrets ?? []).text;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let shuttingDown = false;
  const onRejection = (reason: unknown): void => {
    options.log(scrub(`klym: unhandled rejection (logged; serving goes on): ${describeFault(reason)}`), 'error');
  };
  const onException = (error: unknown): void => {
    if (shuttingDown) {
      options.log(scrub(`klym: another uncaught exception while shutting down; exiting now: ${describeFault(error)}`), 'critical');
      exit(2);
      return;
    }
    shuttingDown = true;
    options.log(scrub(`klym: uncaught exception; shutting down (running tasks get a grace period, then are cancelled): ${describeFault(error)}`), 'critical');
    options.shutdown();
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
