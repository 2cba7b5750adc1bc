// A stdio MCP server on the v2 SDK (`serveStdio`): 2026-07-28 to a client that probes `server/discover`,
// 2025-11-25 to one that sends `initialize`. One tool, `echo` (`{ message }`), which answers with the revision
// it serves (the SDK's `era`, `legacy` or `modern`, named by its date).
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const REVISION = { legacy: '2025-11-25', modern: '2026-07-28' } as const;

serveStdio(({ era }) => {
  const server = new McpServer({ name: 'mcp-2026-07-28-stdio', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes its message and the revision', inputSchema: z.object({ message: z.string() }) }, async ({ message }) => ({
    content: [{ type: 'text', text: `${message} (${REVISION[era]})` }],
  }));
  return server;
});
