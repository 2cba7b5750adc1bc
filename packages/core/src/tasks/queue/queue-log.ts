import type { Redactor } from '../../redact.ts';

/** Where the task queue's lines go: the server's log. */
export type QueueLogListener = (line: string, level: 'info' | 'warning' | 'error') => void;

/** What the task queue says about Redis: a lost connection once per outage, not once per retry. */
export interface QueueLog {
  /** A connection closed, for `reason` if known: said once until `ready()`. */
  lost(reason?: string): void;
  /** An error from BullMQ or ioredis; one about a connection counts as `lost`. */
  failed(error: unknown): void;
  /** A connection is ready: says so when one had been lost. */
  ready(): void;
  warning(line: string): void;
  /** Why Redis is unreachable, while it is: the last connection failure, for the errors of calls meanwhile. */
  readonly outage: string | undefined;
}

// ioredis and BullMQ say a connection failed in these words (BullMQ's own check looks for the first two).
const CONNECTION_FAILURE =
  /ECONNREFUSED|Connection is closed|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|Stream isn't writeable|MaxRetriesPerRequest|Command timed out|Socket closed/i;

/** Whether `error` says a connection to Redis failed (rather than a command). */
export const isConnectionFailure = (error: unknown): boolean =>
  CONNECTION_FAILURE.test(messageOf(error)) || /^E[A-Z]+$/.test(String((error as { code?: unknown })?.code ?? ''));

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The task queue's log of Redis at `where`; every line redacted, so a URL's password never shows. */
export function createQueueLog(where: string, redact: Redactor, onLog: QueueLogListener | undefined): QueueLog {
  let outage: string | undefined;
  let lastError: string | undefined;
  const say = (line: string, level: 'info' | 'warning' | 'error'): void => {
    try {
      onLog?.(redact.text(line), level);
    } catch {
      // A listener's failure must not break the queue.
    }
  };
  const lost = (reason: string | undefined): void => {
    // A connection that closes says only that: the error that came with it, if any, says why.
    const why = reason ?? outage ?? 'its connection closed';
    if (outage === undefined) say(`The task queue lost Redis at ${where} (${why}); it reconnects by itself`, 'warning');
    outage = why;
  };
  return {
    lost: (reason) => lost(reason === undefined ? undefined : redact.text(reason)),
    failed(error) {
      const message = redact.text(messageOf(error));
      if (isConnectionFailure(error)) {
        lost(message);
      } else if (message !== lastError) {
        // BullMQ repeats an error for each retry of the same failing call: said once until another comes.
        say(`The task queue on Redis at ${where}: ${message}`, 'error');
      }
      lastError = message;
    },
    ready() {
      if (outage !== undefined) say(`The task queue reached Redis at ${where} again`, 'info');
      outage = undefined;
      lastError = undefined;
    },
    warning: (line) => say(line, 'warning'),
    get outage() {
      return outage;
    },
  };
}
