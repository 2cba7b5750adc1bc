/**
 * `@klym/core/mcp`: Klym's task tools on any `McpServer`, so another agent can serve them too.
 * @module
 */
export {
  TASK_TOOLS_INSTRUCTIONS,
  TASK_TOOL_NAMES,
  registerTaskTools,
  type RegisterTaskToolsOptions,
  type TaskToolExtra,
} from './mcp/register-task-tools.ts';
export { AGENT_TASK_TOOL_NAME, MCP_TASKS_CAPABILITY, registerAgentTaskTool } from './mcp/register-agent-task-tool.ts';
export { createMcpTaskStore, type McpTaskStore, type McpTaskStoreOptions } from './mcp/mcp-task-store.ts';
export { toMcpTask, toToolResult, type McpTaskTiming } from './mcp/mcp-task-view.ts';
export { createProgressReporter, type ProgressReporter, type ProgressReporterOptions } from './mcp/progress-reporter.ts';
