import type { TaskService } from '@klym/core';
import {
  AGENT_TASK_TOOL_NAME,
  MCP_TASKS_CAPABILITY,
  TASK_TOOLS_INSTRUCTIONS,
  TASK_TOOL_NAMES,
  answerUnknownToolsAsToolErrors,
  createMcpTaskStore,
  registerAgentTaskTool,
  registerTaskTools,
  takesFormElicitation,
} from '@klym/core/mcp';
import { McpServer, type Transport } from '@modelcontextprotocol/server';
import { refuseInvalidParams } from './json-rpc.ts';

/** Klym's name and version in `initialize`. */
export const SERVER_INFO = { name: 'klym', version: '0.1.0' } as const;

/**
 * Builds the 2025-11-25 MCP server of one client session (the v2 SDK's `McpServer`): core's seven task tools and `run_agent_task` over `service`,
 * the `logging` capability (`logging/setLevel` is honoured; the end of each task started in this session is
 * logged to it) and the `tasks` capability, whose `tasks/*` requests see the tasks of `principal` — the
 * principal the session belongs to (`anonymous` over stdio).
 */
export function createKlymMcpServer(service: TaskService, principal = 'anonymous'): McpServer {
  const mcp = new McpServer(SERVER_INFO, { capabilities: { logging: {}, tasks: MCP_TASKS_CAPABILITY }, instructions: TASK_TOOLS_INSTRUCTIONS });
  // A 2025-11-25 session's client capabilities are those its `initialize` declared (the accessor the v2 SDK keeps for that era).
  const taskStore = createMcpTaskStore(service, { principal, elicits: () => takesFormElicitation(mcp.server.getClientCapabilities()) });
  registerTaskTools(mcp, service);
  // Before run_agent_task, whose answer the SDK must not check: it sits in front and passes the rest on.
  answerUnknownToolsAsToolErrors(mcp, [...TASK_TOOL_NAMES, AGENT_TASK_TOOL_NAME]);
  registerAgentTaskTool(mcp, service, taskStore);
  return mcp;
}

/**
 * Builds the MCP server of one client session ({@link createKlymMcpServer}) and connects it to `transport`,
 * with each request's params checked first: params that do not fit the method are answered `-32602
 * Invalid params` naming the field, not the SDK's `-32603` with a zod dump.
 */
export async function connectKlymMcpServer(service: TaskService, transport: Transport, principal = 'anonymous'): Promise<McpServer> {
  const mcp = createKlymMcpServer(service, principal);
  await mcp.connect(transport);
  refuseInvalidParams(transport);
  return mcp;
}
