import type { CallToolResult, Task } from '@modelcontextprotocol/server';
import { MCP_TASK_DEFAULTS } from '../defaults.ts';
import { KlymError, isKlymError } from '../errors.ts';
import type { StartTaskArgs } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';
import { MCP_STATUS, toMcpTask, toToolResult } from './mcp-task-view.ts';
import { startOptionsOf } from './start-options.ts';
import { positiveInteger } from '../internal/positive.ts';

/** Options of {@link createMcpTaskStore}. */
export interface McpTaskStoreOptions {
  /**
   * Whose tasks the MCP server that holds this store serves: the principal of its session (Klym binds a
   * session to the principal that opened it). Tasks are this principal's, never the session's, so a
   * reconnect sees them; another principal's task is not found, exactly as one that never existed.
   */
  readonly principal: string;
  /** The `pollInterval` clients are told, in milliseconds. @default MCP_TASK_DEFAULTS.pollIntervalMs (1_000) */
  readonly pollIntervalMs?: number;
  /** Tasks a `tasks/list` page holds. @default MCP_TASK_DEFAULTS.listPageSize (50) */
  readonly pageSize?: number;
  /**
   * Whether the session's client takes form elicitations (it declared `elicitation` in `initialize`): a task
   * waiting for input then shows its question alone, and `tasks/result` asks it there; otherwise its
   * `statusMessage` says to answer with `reply_to_agent_task`. Asked each time a task is shown. @default () => false
   */
  readonly elicits?: () => boolean;
}

/** Klym's task service as MCP 2025-11-25 tasks of one principal: what `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` answer. */
export interface McpTaskStore {
  readonly principal: string;
  /** The `pollInterval` this store tells clients, in milliseconds (it also paces a waiting `tasks/result`). */
  readonly pollIntervalMs: number;
  /** Whether the session's client takes form elicitations ({@link McpTaskStoreOptions.elicits}). */
  elicits(): boolean;
  /**
   * Starts a Klym task from a task-augmented `tools/call`'s parsed arguments and its `params._meta` (the
   * trace context), and answers it as an MCP task.
   * @throws {KlymError} as `TaskService.start` does
   */
  start(args: StartTaskArgs, meta: unknown): Promise<Task>;
  /** A task record as this store shows it (`ttl`, `pollInterval` included). */
  toTask(task: TaskRecord): Task;
  /** The caller's task, or `null` when it cannot see one of that id (another principal's, evicted, unknown). */
  getTask(taskId: string): Promise<Task | null>;
  /**
   * A finished task's `CallToolResult`.
   * @throws {KlymError} `TASK_NOT_FOUND` for a task the caller cannot see; `INVALID_ARGUMENT` for one still running
   */
  getTaskResult(taskId: string): Promise<CallToolResult>;
  /** The caller's tasks, newest first, a page at a time. */
  listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }>;
  /**
   * Cancels a running or pending task and answers it as it is now.
   * @throws {KlymError} `TASK_NOT_FOUND` as above; `INVALID_ARGUMENT` for a task that already ended
   */
  cancelTask(taskId: string): Promise<Task>;
}

/**
 * Klym's task service as MCP 2025-11-25 tasks, so MCP tasks and Klym's tasks are one set: the MCP `taskId` is
 * the Klym `task_id`, `tasks/list` lists what `list_agent_tasks` lists, `tasks/cancel` cancels as
 * `cancel_agent_task` does, and tasks outlive a restart in whatever store the service keeps them (SQLite,
 * Redis). Ownership is by `principal`, never by session. The task's `ttl` is the service's `ttlMs`, counted
 * from the task's end (a requested `ttl` is not honoured).
 *
 * @throws {KlymError} `CONFIG_INVALID` for a `pollIntervalMs` or `pageSize` that is not a positive integer.
 * @example
 * ```ts
 * const taskStore = createMcpTaskStore(service, { principal: 'grynya' })
 * registerAgentTaskTool(server, service, taskStore)
 * ```
 */
export function createMcpTaskStore(service: TaskService, options: McpTaskStoreOptions): McpTaskStore {
  const caller = { principal: options.principal };
  const timing = { ttlMs: service.ttlMs, pollIntervalMs: positiveInteger('pollIntervalMs', options.pollIntervalMs ?? MCP_TASK_DEFAULTS.pollIntervalMs) };
  const pageSize = positiveInteger('pageSize', options.pageSize ?? MCP_TASK_DEFAULTS.listPageSize);
  const elicits = options.elicits ?? (() => false);
  const toTask = (task: TaskRecord): Task => toMcpTask(task, { ...timing, elicits: elicits() });
  /** The caller's task, or `undefined` when it cannot see one of that id (the SDK answers the spec's error). */
  const find = async (taskId: string): Promise<TaskRecord | undefined> => {
    try {
      return await service.tasks.get(taskId, caller);
    } catch (error) {
      if (isKlymError(error, 'TASK_NOT_FOUND')) return undefined;
      throw error;
    }
  };

  return {
    principal: options.principal,
    pollIntervalMs: timing.pollIntervalMs,
    elicits,
    toTask,
    async start(args, meta) {
      const started = await service.start(args, options.principal, startOptionsOf(meta));
      return toTask(await service.tasks.get(started.task_id, caller));
    },
    async getTask(taskId) {
      const task = await find(taskId);
      return task === undefined ? null : toTask(task);
    },
    async getTaskResult(taskId) {
      const task = await service.tasks.get(taskId, caller);
      if (!isTerminal(task.status)) throw new KlymError('INVALID_ARGUMENT', `Task ${taskId} is still ${task.status}; its result comes when it ends`);
      return toToolResult(task, await service.status({ task_id: taskId }, options.principal));
    },
    async cancelTask(taskId) {
      const outcome = await service.tasks.cancel(taskId, caller);
      if (!outcome.cancelled) throw new KlymError('INVALID_ARGUMENT', `Cannot cancel task in terminal status: ${MCP_STATUS[outcome.task.status]}`);
      return toTask(outcome.task);
    },
    async listTasks(cursor) {
      const page = await service.tasks.list(caller, {}, { limit: pageSize, ...(cursor === undefined ? {} : { cursor }) });
      return { tasks: page.tasks.map(toTask), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) };
    },
  };
}
