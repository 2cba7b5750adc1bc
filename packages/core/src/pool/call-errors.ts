import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { KlymError, isKlymError } from '../errors.ts';
import { isMessageTooLarge, messageTooLargeError } from './message-limit.ts';

/**
 * Whether a failed request provably never reached the upstream's handler, so sending it again on a fresh
 * session cannot run it twice: the server refused the session (a restarted Streamable HTTP server answers
 * 400 or 404; a legacy SSE server 404 on its message endpoint), or the session reconnected by itself to a
 * server that never saw its `initialize` and refused the request.
 */
export function neverReachedUpstream(error: unknown): boolean {
  if (error instanceof SdkHttpError) return error.status === 400 || error.status === 404;
  if (error instanceof ProtocolError) return error.code === ProtocolErrorCode.InvalidRequest && /before initialization/i.test(error.message);
  return error instanceof Error && error.message.startsWith('Error POSTing to endpoint (HTTP 404)');
}

/**
 * Whether the session is still sound after this error: the upstream answered with a plain protocol error,
 * or with a message over its `maxMessageBytes`, which was skipped whole.
 */
export function leavesSessionSound(error: unknown): boolean {
  return (
    (error instanceof ProtocolError && (error.code === ProtocolErrorCode.InvalidParams || error.code === ProtocolErrorCode.MethodNotFound)) ||
    isMessageTooLarge(error)
  );
}

/**
 * What went wrong in a call, as a {@link KlymError} that names the upstream and the tool. `aborted` says
 * whether the caller cut the call short, and why.
 */
export function callError(
  error: unknown,
  context: {
    upstream: string;
    toolName: string;
    aborted: { readonly aborted: boolean; readonly reason: unknown };
    timeoutMs: number;
    broken: Error | undefined;
  },
): KlymError {
  const { upstream, toolName } = context;
  if (isKlymError(error)) return error;
  if (context.aborted.aborted) {
    return new KlymError('ABORTED', `The call to ${upstream}/${toolName} was aborted`, { upstream, toolName, cause: context.aborted.reason });
  }
  if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
    return new KlymError('UPSTREAM_TIMEOUT', `Upstream "${upstream}" did not answer ${toolName} within ${context.timeoutMs} ms; it was sent a cancellation`, {
      upstream,
      toolName,
      cause: error,
    });
  }
  const tooLarge = messageTooLargeError(error, upstream, toolName);
  if (tooLarge !== undefined) return tooLarge;
  const lost = context.broken ?? (error instanceof SdkError && error.code === SdkErrorCode.ConnectionClosed ? error : undefined);
  if (lost !== undefined) {
    return new KlymError('UPSTREAM_UNAVAILABLE', `Upstream "${upstream}" was lost during ${toolName} (${describe(lost)}); the call may or may not have run`, {
      upstream,
      toolName,
      cause: error,
    });
  }
  return new KlymError('UPSTREAM_ERROR', `Upstream "${upstream}" failed ${toolName}: ${describe(error)}`, { upstream, toolName, cause: error });
}

/** An error's message, for messages that name a cause. */
export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
