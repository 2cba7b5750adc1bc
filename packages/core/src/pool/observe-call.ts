import type { CallToolResult } from '@modelcontextprotocol/client';
import { isKlymError } from '../errors.ts';
import type { PoolClock } from './clock.ts';
import type { UpstreamCall } from './upstream-status.ts';

/**
 * Tells `onCall` of a tool call once `calling` has settled: its outcome, how long it took on `clock` (from
 * now, waiting for a session included), and whether the upstream's tool list then had the tool (`listed`). The call's outcome is passed on unchanged, whatever the
 * observer does. Internal to the session pool.
 */
export function observeCall(
  calling: Promise<CallToolResult>,
  onCall: (call: UpstreamCall) => void,
  call: { readonly upstream: string; readonly toolName: string; listed(): boolean },
  clock: Pick<PoolClock, 'now'>,
): Promise<CallToolResult> {
  const startedAt = clock.now();
  const { upstream, toolName } = call;
  const observe = (outcome: UpstreamCall['outcome']): void => {
    try {
      onCall({ upstream, toolName, listed: call.listed(), outcome, durationMs: clock.now() - startedAt });
    } catch {
      // An observer's failure is its own: the call's outcome stands.
    }
  };
  return calling.then(
    (result) => {
      observe(result.isError === true ? 'tool-error' : 'ok');
      return result;
    },
    (error: unknown) => {
      observe(isKlymError(error) ? error.code : 'UPSTREAM_ERROR');
      throw error;
    },
  );
}
