import { neverReachedUpstream } from './call-errors.ts';
import type { InFlightCall } from './in-flight-call.ts';

/**
 * The pool's retry rule: a request that provably never reached the upstream is tried once more, on a fresh
 * session; one whose outcome is unknown (timed out, aborted, lost mid-flight) never is. `attempt` counts
 * from 1. Internal to the session pool.
 */
export const callRetry = {
  /**
   * Whether a call whose session could not be taken tries again: only when the connect failed fast (it never
   * carried the request, and did not use up `connectMs`), the breaker still lets connects through, and the
   * caller has not given up.
   */
  afterTake(attempt: number, call: InFlightCall, connect: { readonly failedFast: boolean; readonly breakerClosed: boolean }): boolean {
    return attempt === 1 && connect.failedFast && connect.breakerClosed && !call.aborted;
  },

  /**
   * Whether a request that failed on its session tries again on a fresh one: only when the server refused it
   * unseen (a session it no longer knows, one that never saw `initialize`), and the caller has not given up.
   */
  afterRequest(attempt: number, call: InFlightCall, error: unknown): boolean {
    return attempt === 1 && neverReachedUpstream(error) && !call.aborted;
  },
};
