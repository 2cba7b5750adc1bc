// A stdio MCP server on the v2 SDK (`serveStdio`): 2026-07-28 to a client that probes `server/discover`,
// 2025-11-25 to one that sends `initialize`. One tool, `echo` (`{ message }`), which answers with the era.
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

serveStdio(({ era }) => {
  const server = new McpServer({ name: 'modern-stdio', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes its message and the era', inputSchema: z.object({ message: z.string() }) }, async ({ message }) => ({
    content: [{ type: 'text', text: `${message} (${era})` }],
  }));
  return server;
});
