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
