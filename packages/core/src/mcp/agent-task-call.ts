import { ProtocolError, ProtocolErrorCode, type McpServer, type RegisteredTool } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { isKlymError } from '../errors.ts';
import type { StartTaskArgs } from '../tasks/task-request.ts';
import { AGENT_TASK_TOOL, argumentFaults } from './task-tool-definitions.ts';

// What `run_agent_task` and the task methods share in both protocol eras: the arguments' one check, the
// JSON-RPC errors a start or a task method answers, and the listing of the tool itself.

/** The params of `tasks/get`, `tasks/result`, `tasks/cancel` (and `tasks/update`, which adds its own). */
export const TASK_ID_PARAMS = z.looseObject({ taskId: z.string().min(1) });

/** A task method's result as the SDK is told to check it: any object (its shape is the era's, built here). */
export const ANY_RESULT = z.looseObject({});

/** What a task method answers for a task the caller cannot see: another principal's, evicted, or unknown alike. */
export const taskNotFound = (): ProtocolError => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Failed to retrieve task: Task not found');

/**
 * A failure of a start or a task method as the JSON-RPC error the tasks specs name: `-32602` for a task the
 * caller cannot see and for a bad argument (`INVALID_ARGUMENT`), `-32603` with the Klym code in the message
 * and `data` otherwise (`TASK_QUEUE_FULL: …`, `SHUTTING_DOWN`, `STORE_UNAVAILABLE`).
 */
export function taskRpcError(error: unknown): ProtocolError {
  if (error instanceof ProtocolError) return error;
  if (isKlymError(error, 'TASK_NOT_FOUND')) return taskNotFound();
  if (isKlymError(error, 'INVALID_ARGUMENT')) return new ProtocolError(ProtocolErrorCode.InvalidParams, error.message, { code: error.code });
  if (isKlymError(error)) return new ProtocolError(ProtocolErrorCode.InternalError, `${error.code}: ${error.message}`, { code: error.code });
  return new ProtocolError(ProtocolErrorCode.InternalError, `Klym failed: ${error instanceof Error ? error.message : String(error)}`, { code: 'INTERNAL' });
}

/** Runs `work`, its failure as {@link taskRpcError}'s. */
export async function asTaskRpc<Result>(work: () => Promise<Result>): Promise<Result> {
  try {
    return await work();
  } catch (error) {
    throw taskRpcError(error);
  }
}

/**
 * `run_agent_task`'s arguments, checked once with `start_async_agent_task`'s strict schema, in the words the
 * SDK uses for every other tool (`budget: Unrecognized key: "max_step"`).
 * @throws {ProtocolError} `-32602` naming what is wrong
 */
export function parseAgentTaskArgs(args: unknown): StartTaskArgs {
  const parsed = AGENT_TASK_TOOL.inputSchema.safeParse(args ?? {});
  if (!parsed.success)
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid arguments for tool run_agent_task: ${argumentFaults(parsed.error)}`, {
      code: 'INVALID_ARGUMENT',
    });
  return parsed.data;
}

/**
 * Lists `run_agent_task` on `server`, with `description` in the words of the era that serves it. Its calls
 * are answered in front of the SDK's `tools/call`, whose handler turns whatever a tool throws into an
 * `isError` result (a start that cannot be made must be a JSON-RPC error) and checks every answer as a
 * `CallToolResult`: the handler given to the SDK here is never called.
 */
export function listAgentTaskTool(server: McpServer, description: string): RegisteredTool {
  return server.registerTool(
    AGENT_TASK_TOOL.name,
    { title: AGENT_TASK_TOOL.title, description, inputSchema: AGENT_TASK_TOOL.inputSchema, annotations: AGENT_TASK_TOOL.annotations },
    () => {
      throw new Error('run_agent_task is answered in front of the tool handlers');
    },
  );
}
