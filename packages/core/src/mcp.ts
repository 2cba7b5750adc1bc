/**
 * `@klym/core/mcp`: Klym's task tools on any `McpServer`, so another agent can serve them too.
 * @module
 */
export { TASK_TOOLS_INSTRUCTIONS, TASK_TOOL_NAMES, registerTaskTools, type RegisterTaskToolsOptions, type TaskToolExtra } from './mcp/register-task-tools.ts';
export { AGENT_TASK_TOOL_NAME, MCP_TASKS_CAPABILITY, registerAgentTaskTool } from './mcp/register-agent-task-tool.ts';
export { createMcpTaskStore, type McpTaskStore, type McpTaskStoreOptions } from './mcp/mcp-task-store.ts';
export {
  createMcp20260728TaskHandler,
  type Mcp20260728RequestOptions,
  type Mcp20260728TaskHandler,
  type Mcp20260728TaskHandlerOptions,
} from './mcp/mcp-2026-07-28-task-handler.ts';
export type { Mcp20260728TaskServerOptions } from './mcp/mcp-2026-07-28-task-server.ts';
export { DECLINED_ANSWER, takesFormElicitation } from './mcp/task-input.ts';
export { answerUnknownToolsAsToolErrors } from './internal/sdk-handlers.ts';
