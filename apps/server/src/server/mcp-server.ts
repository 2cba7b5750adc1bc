import type { TaskService } from '@klym/core';
import { TASK_TOOLS_INSTRUCTIONS, registerTaskTools } from '@klym/core/mcp';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { refuseInvalidParams } from './json-rpc.ts';

/** Klym's name and version in `initialize`. */
export const SERVER_INFO = { name: 'klym', version: '0.1.0' } as const;

/**
 * Builds the MCP server of one client session: core's five task tools over `service`, and the `logging`
 * capability (`logging/setLevel` is honoured; the end of each task started in this session is logged to it).
 */
export function createKlymMcpServer(service: TaskService): McpServer {
  const mcp = new McpServer(SERVER_INFO, { capabilities: { logging: {} }, instructions: TASK_TOOLS_INSTRUCTIONS });
  registerTaskTools(mcp, service);
  return mcp;
}

/**
 * Builds the MCP server of one client session ({@link createKlymMcpServer}) and connects it to `transport`,
 * with each request's params checked first: params that do not fit the method are answered `-32602
 * Invalid params` naming the field, not the SDK's `-32603` with a zod dump.
 */
export async function connectKlymMcpServer(service: TaskService, transport: Transport): Promise<McpServer> {
  const mcp = createKlymMcpServer(service);
  await mcp.connect(transport);
  refuseInvalidParams(transport);
  return mcp;
}
