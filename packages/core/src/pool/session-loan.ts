import type { SessionSource } from './session-lender.ts';
import type { UpstreamLogEntry, UpstreamSession } from './upstream-session.ts';

/**
 * A session lent for one call: what the upstream logs meanwhile also goes to the call's `onLog`, until the
 * session is handed back. Internal to the session pool.
 */
export function lendLog(session: UpstreamSession, onLog: ((entry: UpstreamLogEntry) => void) | undefined): void {
  session.borrowerLog = onLog;
}

/**
 * Hands `session` back to `source` (kept if `sound`, else closed and replaced) and stops passing its log
 * to the call. At once, without a promise, where both allow it: a stdio session whose caller listens to
 * its log first lets one event-loop turn pass, and a source may need time to take it back.
 */
export function handBack(
  source: SessionSource,
  session: UpstreamSession,
  sound: boolean,
  onLog: ((entry: UpstreamLogEntry) => void) | undefined,
): void | Promise<void> {
  // Stderr comes on its own pipe: lines the child wrote before answering may be read just after the answer.
  if (session.transport === 'stdio' && onLog !== undefined) return new Promise(setImmediate).then(() => giveBack(source, session, sound));
  return giveBack(source, session, sound);
}

function giveBack(source: SessionSource, session: UpstreamSession, sound: boolean): void | Promise<void> {
  session.borrowerLog = undefined;
  return source.put(session, sound);
}
