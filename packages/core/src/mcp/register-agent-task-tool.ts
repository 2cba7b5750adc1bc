import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isTerminal } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { ServerCapabilities, Task } from '@modelcontextprotocol/sdk/types.js';
import { startTaskSchema, type StartTaskArgs } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import type { McpTaskStore } from './mcp-task-store.ts';
import { createProgressReporter, progressTokenOf } from './progress-reporter.ts';
import { answerRefusedTaskStarts } from './task-start-refusals.ts';

/** The `tasks` capability a server serving `run_agent_task` declares: task-augmented `tools/call`, `tasks/list`, `tasks/cancel`. */
export const MCP_TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const satisfies NonNullable<ServerCapabilities['tasks']>;

/** The name of the MCP-native task tool. */
export const AGENT_TASK_TOOL_NAME = 'run_agent_task';

/**
 * Registers `run_agent_task` on `server`: the arguments of `start_async_agent_task`, served as an MCP task
 * (`execution.taskSupport: "required"`). A call with `task` answers `CreateTaskResult` at once; the task is a
 * Klym task (`check_task_status`, `list_agent_tasks`, `cancel_agent_task` see it, and `tasks/get`,
 * `tasks/list`, `tasks/cancel` see the ones those tools started), and `tasks/result` is the `CallToolResult`
 * of its final answer. `server` must have been created with `taskStore` (this `store`) and the
 * {@link MCP_TASKS_CAPABILITY}. While its session is open the client is sent `notifications/tasks/status`
 * at each transition of the tasks it started here (as the task manager of this process hears them: on a
 * front whose tasks run on workers, their end), and, when the call carried `_meta.progressToken`,
 * `notifications/progress` of its steps at most once a second. A start that cannot be made answers the
 * JSON-RPC error naming why (`-32602` for a bad argument, `-32603` with the Klym code otherwise, e.g.
 * `TASK_QUEUE_FULL`). Call it before `server.connect()`.
 *
 * @example
 * ```ts
 * const taskStore = createMcpTaskStore(service, { principal })
 * const server = new McpServer(info, { taskStore, capabilities: { logging: {}, tasks: MCP_TASKS_CAPABILITY } })
 * registerTaskTools(server, service)
 * registerAgentTaskTool(server, service, taskStore)
 * ```
 */
export function registerAgentTaskTool(server: McpServer, service: TaskService, store: McpTaskStore): void {
  const started = new Set<string>();
  const refuse = answerRefusedTaskStarts(server, AGENT_TASK_TOOL_NAME);
  const progress = createProgressReporter(server, service);

  server.experimental.tasks.registerToolTask(
    AGENT_TASK_TOOL_NAME,
    {
      title: 'Run a background task (MCP task)',
      description:
        'The same work as start_async_agent_task, served as an MCP task: call it with `task`, follow it with tasks/get ' +
        '(or notifications/tasks/status), and read the final answer with tasks/result. The task id is a Klym task_id, so ' +
        'check_task_status, list_agent_tasks and cancel_agent_task work on it too. Takes the same arguments.',
      inputSchema: startTaskSchema,
      execution: { taskSupport: 'required' },
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    {
      createTask: async (args, extra) => {
        // The SDK parsed `args` with startTaskSchema: its type is lost in registerToolTask's overloads.
        const task = await store.start(args as StartTaskArgs, extra['_meta']).catch((error: unknown) => {
          refuse(error);
          throw error;
        });
        started.add(task.taskId);
        const token = progressTokenOf(extra);
        if (token !== undefined) progress.watch(task.taskId, store.principal, token);
        // The task may have moved while it was being created, before the events above could be heard for it.
        void catchUp(task);
        return { task };
      },
      getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as never,
    },
  );


  const tell = (task: Task): void => {
    if (!server.isConnected()) return;
    server.server.notification({ method: 'notifications/tasks/status', params: task }).catch(() => {
      // The client went away as the task moved: there is nobody left to tell.
    });
  };
  const catchUp = async (created: Task): Promise<void> => {
    const now = await store.getTask(created.taskId).catch(() => null);
    if (now === null || !started.has(created.taskId) || (now.status === created.status && now.statusMessage === created.statusMessage)) return;
    if (isTerminal(now.status)) started.delete(created.taskId);
    tell(now);
  };
  const unsubscribe = service.onEvent((event) => {
    if (!started.has(event.task.id)) return;
    if (event.type !== 'task-start' && event.type !== 'task-resume' && event.type !== 'task-end') return;
    if (event.type === 'task-end') started.delete(event.task.id);
    tell(store.toTask(event.task));
  });
  const previous = server.server.onclose;
  server.server.onclose = () => {
    unsubscribe();
    progress.close();
    previous?.();
  };
}
