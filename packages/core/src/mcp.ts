/**
 * `@klym/core/mcp`: Klym's task tools on any `McpServer`, so another agent can serve them too.
 * @module
 */
export { TASK_TOOLS_INSTRUCTIONS, TASK_TOOL_NAMES, registerTaskTools, type RegisterTaskToolsOptions, type TaskToolExtra } from './mcp/register-task-tools.ts';
export { AGENT_TASK_TOOL_NAME, MCP_TASKS_CAPABILITY, registerAgentTaskTool } from './mcp/register-agent-task-tool.ts';
export { createMcpTaskStore, type McpTaskStore, type McpTaskStoreOptions } from './mcp/mcp-task-store.ts';
export { toMcpTask, toToolResult, type McpTaskTiming } from './mcp/mcp-task-view.ts';
export {
  createMcp20260728TaskHandler,
  type Mcp20260728RequestOptions,
  type Mcp20260728TaskHandler,
  type Mcp20260728TaskHandlerOptions,
} from './mcp/mcp-2026-07-28-task-handler.ts';
export {
  TASKS_EXTENSION_ID,
  createMcp20260728TaskServer,
  declaresTasksExtension,
  toMcp20260728Task,
  type Mcp20260728Task,
  type Mcp20260728TaskServerOptions,
} from './mcp/mcp-2026-07-28-task-server.ts';
export { MAX_LISTEN_TASK_IDS } from './mcp/task-listen.ts';
export { answerUnknownToolsAsToolErrors } from './mcp/sdk-handlers.ts';
export { TASK_TOOLS, type TaskToolDefinition } from './mcp/task-tool-definitions.ts';
export { createProgressReporter, type ProgressReporter, type ProgressReporterOptions } from './mcp/progress-reporter.ts';
