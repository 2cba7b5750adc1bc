import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { isKlymError } from '../errors.ts';
import { parseArgs, startTaskSchema } from '../tasks/task-request.ts';

type Handler = (request: { params?: { name?: unknown; task?: unknown; arguments?: unknown } }, extra: { requestId: RequestId }) => Promise<unknown>;

/** A start that could not be made, as the JSON-RPC error the spec has a task-augmented request answer. */
export function refusal(error: unknown): McpError {
  if (error instanceof McpError) return error;
  if (isKlymError(error, 'INVALID_ARGUMENT')) return new McpError(ErrorCode.InvalidParams, error.message, { code: error.code });
  if (isKlymError(error)) return new McpError(ErrorCode.InternalError, `${error.code}: ${error.message}`, { code: error.code });
  return new McpError(ErrorCode.InternalError, `Klym failed: ${error instanceof Error ? error.message : String(error)}`, { code: 'INTERNAL' });
}

/**
 * Makes a task-augmented call of `toolName` that cannot start answer the JSON-RPC error naming why. The
 * SDK turns any failure of a tool handler into an `isError` tool result, then refuses that result as no
 * `CreateTaskResult` with `-32602` and a zod dump that says nothing of the cause; so the arguments are
 * checked here first, and a start the handler recorded in `refusals` (by request id) is answered with its
 * own error. Wraps the server's `tools/call` handler, which the SDK keeps in a private map: when that map
 * is not there (another SDK version) nothing changes but the messages.
 */
export function answerRefusedTaskStarts(server: McpServer, toolName: string, refusals: Map<RequestId, McpError>): void {
  const handlers = (server.server as unknown as Record<string, Map<string, Handler> | undefined>)['_requestHandlers'];
  const inner = handlers?.get('tools/call');
  if (handlers === undefined || inner === undefined) return;
  handlers.set('tools/call', async (request, extra) => {
    if (request.params?.name !== toolName || request.params.task === undefined) return inner(request, extra);
    try {
      parseArgs(startTaskSchema, request.params.arguments ?? {});
      return await inner(request, extra);
    } catch (error) {
      throw refusals.get(extra.requestId) ?? refusal(error);
    } finally {
      refusals.delete(extra.requestId);
    }
  });
}
