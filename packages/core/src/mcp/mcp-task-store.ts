import type { TaskStore as SdkTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';
import { MCP_TASK_DEFAULTS } from '../defaults.ts';
import { KlymError, isKlymError } from '../errors.ts';
import type { StartTaskArgs } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/task-types.ts';
import { toMcpTask, toToolResult } from './mcp-task-view.ts';
import { startOptionsOf } from './start-options.ts';

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
}

/** The SDK's `TaskStore` over Klym's task service, with the view of a task it answers. */
export interface McpTaskStore extends SdkTaskStore {
  readonly principal: string;
  /**
   * Starts a Klym task from a task-augmented `tools/call`'s parsed arguments and its `params._meta` (the
   * trace context), and answers it as an MCP task. A tool's `createTask` handler calls it with the
   * arguments the SDK parsed; the SDK-facing `createTask`, which has only the unparsed request, is refused.
   * @throws {KlymError} as `TaskService.start` does
   */
  start(args: StartTaskArgs, meta: unknown): Promise<Task>;
  /** A task record as this store shows it (`ttl`, `pollInterval` included). */
  toTask(task: TaskRecord): Task;
}

const positiveInteger = (name: string, value: number): number => {
  if (!Number.isInteger(value) || value <= 0) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be a positive integer, got ${value}`);
  return value;
};

/**
 * The SDK's experimental `TaskStore` (`new McpServer(info, { taskStore })`) backed by Klym's task service,
 * so MCP tasks and Klym's tasks are one set: the MCP `taskId` is the Klym `task_id`, `tasks/list` lists what
 * `list_agent_tasks` lists, `tasks/cancel` cancels as `cancel_agent_task` does, and tasks outlive a restart
 * in whatever store the service keeps them (SQLite, Redis). `start` starts a Klym task from the
 * `tools/call` arguments the SDK parsed. The SDK passes each call the session id; ownership is by `principal` instead.
 * The task's `ttl` is the service's `ttlMs`, counted from the task's end (a requested `ttl` is not honoured).
 *
 * @throws {KlymError} `CONFIG_INVALID` for a `pollIntervalMs` or `pageSize` that is not a positive integer.
 * @example
 * ```ts
 * const taskStore = createMcpTaskStore(service, { principal: 'grynya' })
 * const server = new McpServer(info, { taskStore, capabilities: { tasks: MCP_TASKS_CAPABILITY } })
 * registerAgentTaskTool(server, service, taskStore)
 * ```
 */
export function createMcpTaskStore(service: TaskService, options: McpTaskStoreOptions): McpTaskStore {
  const caller = { principal: options.principal };
  const timing = { ttlMs: service.ttlMs, pollIntervalMs: positiveInteger('pollIntervalMs', options.pollIntervalMs ?? MCP_TASK_DEFAULTS.pollIntervalMs) };
  const pageSize = positiveInteger('pageSize', options.pageSize ?? MCP_TASK_DEFAULTS.listPageSize);
  const toTask = (task: TaskRecord): Task => toMcpTask(task, timing);
  /** The caller's task, or `undefined` when it cannot see one of that id (the SDK answers the spec's error). */
  const find = async (taskId: string): Promise<TaskRecord | undefined> => {
    try {
      return await service.tasks.get(taskId, caller);
    } catch (error) {
      if (isKlymError(error, 'TASK_NOT_FOUND')) return undefined;
      throw error;
    }
  };
  const visible = async (taskId: string): Promise<TaskRecord> => {
    const task = await find(taskId);
    if (task === undefined) throw new KlymError('TASK_NOT_FOUND', `No task ${taskId}`);
    return task;
  };

  return {
    principal: options.principal,
    toTask,
    async start(args, meta) {
      const started = await service.start(args, options.principal, startOptionsOf(meta));
      return toTask(await visible(started.task_id));
    },
    createTask() {
      // Only a tool's handler has the arguments the SDK parsed; the request here is as the client sent it.
      return Promise.reject(new KlymError('INVALID_ARGUMENT', "Klym tasks are started by a tool's createTask handler through McpTaskStore.start, with the arguments the SDK parsed"));
    },
    async getTask(taskId) {
      const task = await find(taskId);
      return task === undefined ? null : toTask(task);
    },
    storeTaskResult() {
      // The task manager stores a task's result as the run ends; nothing else may write it.
      return Promise.reject(new KlymError('INVALID_ARGUMENT', "A Klym task's result is the one its run ended with; it cannot be stored from outside"));
    },
    async getTaskResult(taskId): Promise<Result> {
      const task = await visible(taskId);
      if (!isTerminal(task.status)) throw new KlymError('INVALID_ARGUMENT', `Task ${taskId} is still ${task.status}; its result comes when it ends`);
      return toToolResult(task, await service.status({ task_id: taskId }, options.principal));
    },
    async updateTaskStatus(taskId, status) {
      // Klym moves its tasks itself; a client may only cancel one (tasks/cancel).
      if (status !== 'cancelled') throw new KlymError('INVALID_ARGUMENT', `A Klym task's status can only be set to cancelled, not ${status}`);
      await service.tasks.cancel(taskId, caller);
    },
    async listTasks(cursor) {
      const page = await service.tasks.list(caller, {}, { limit: pageSize, ...(cursor === undefined ? {} : { cursor }) });
      return { tasks: page.tasks.map(toTask), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) };
    },
  };
}
