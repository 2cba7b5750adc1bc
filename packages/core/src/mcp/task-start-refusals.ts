import { AsyncLocalStorage } from 'node:async_hooks';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startRefusal } from './start-refusal.ts';

type Handler = (request: { params?: { name?: unknown; task?: unknown } }, extra: unknown) => Promise<unknown>;
type ValidateToolInput = (tool: unknown, args: unknown, toolName: string) => Promise<unknown>;

/** A start that could not be made, as the JSON-RPC error the spec has a task-augmented request answer. */
export function refusal(error: unknown): McpError {
  if (error instanceof McpError) return error;
  const { code, message, data } = startRefusal(error);
  return new McpError(code, message, data);
}

/** Records why the task-augmented call being served could not start; see {@link answerRefusedTaskStarts}. */
export type RefuseTaskStart = (error: unknown) => void;

/**
 * Makes a task-augmented call of `toolName` that cannot start answer the JSON-RPC error naming why, and
 * returns the function its `createTask` handler records such a failure with. The SDK turns any failure of
 * a tool call (its own check of the arguments included) into an `isError` tool result, then refuses that
 * result as no `CreateTaskResult` with `-32602` and a zod dump that says nothing of the cause. So the
 * failure is kept, for the call being served (an `AsyncLocalStorage` slot), where it happens: in the SDK's
 * check of the arguments (the only one they get) and in `createTask`; and the call answers it instead of
 * the dump. Reaches into the SDK's private `tools/call` handler map and `validateToolInput`: where either is
 * not there (another SDK version) nothing changes but the messages.
 */
export function answerRefusedTaskStarts(server: McpServer, toolName: string): RefuseTaskStart {
  const serving = new AsyncLocalStorage<{ refused?: McpError }>();
  const refuse: RefuseTaskStart = (error) => {
    const slot = serving.getStore();
    if (slot !== undefined) slot.refused ??= refusal(error);
  };
  const internals = server as unknown as { validateToolInput?: ValidateToolInput };
  const handlers = (server.server as unknown as Record<string, Map<string, Handler> | undefined>)['_requestHandlers'];
  const inner = handlers?.get('tools/call');
  const validate = internals.validateToolInput;
  if (handlers === undefined || inner === undefined || validate === undefined) return refuse;
  internals.validateToolInput = async (tool, args, name) => {
    try {
      return await validate.call(server, tool, args, name);
    } catch (error) {
      if (name === toolName) refuse(error);
      throw error;
    }
  };
  handlers.set('tools/call', async (request, extra) => {
    if (request.params?.name !== toolName || request.params.task === undefined) return inner(request, extra);
    const slot: { refused?: McpError } = {};
    try {
      return await serving.run(slot, () => inner(request, extra));
    } catch (error) {
      throw slot.refused ?? refusal(error);
    }
  });
  return refuse;
}
