// An agent that installed @klym/core from its tarball: both entry points, typed, and working.
import { createSessionPool, KlymError, type SessionPool } from '@klym/core';
import { createInMemoryUpstream } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

function echoServer(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

const pool: SessionPool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echoServer) } });
const listing = await pool.listTools();
const result = await pool.callTool('demo', 'echo', { text: 'from the tarball' });
await pool.close();
const closed = await pool.callTool('demo', 'echo', { text: 'late' }).catch((error: unknown) => error);

const text = (result.content as { text: string }[])[0]?.text;
if (listing.tools[0]?.name !== 'demo__echo' || text !== 'from the tarball' || !(closed instanceof KlymError) || closed.code !== 'POOL_CLOSED') {
  console.error('consumer check failed', { tools: listing.tools.map((tool) => tool.name), text, closed });
  process.exit(1);
}
console.log(`consumer check passed: ${listing.tools[0].name} answered ${JSON.stringify(text)}; after close: ${closed.code}`);
