#!/usr/bin/env node
// `pnpm start` at this stage: the embedded default, no key and no outside server. It starts the fake
// grynya-mcp-server on a loopback port, opens a pool to it over legacy SSE (the path the real
// deployment uses, Host override included), lists the tools, runs one query_graph and prints the
// pool's status. The MCP server that serves tasks to Grynya replaces this in a later stage.
import { createSessionPool } from '@klym/core';
import { createFakeGrynya } from '@klym/fake-grynya';

await using grynya = await createFakeGrynya({ allowedHosts: ['localhost'] });
console.log(`fake grynya-mcp-server: ${grynya.sseUrl} (allows Host: localhost only, like the real one in Docker)`);

await using pool = await createSessionPool({
  upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', headers: { Host: 'localhost' } } },
});
const listing = await pool.listTools();
for (const [name, report] of Object.entries(listing.upstreams)) {
  console.log(report.ok ? `${name}: ${report.toolCount} tools` : `${name}: unavailable: ${report.error.message}`);
}
for (const tool of listing.tools) console.log(`  ${tool.name}  (${tool.originalName})`);

const started = performance.now();
const result = await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { timeoutMs: 5_000 });
const elapsed = (performance.now() - started).toFixed(1);
const text = result.content.map((item) => (item.type === 'text' ? item.text : `[${item.type}]`)).join('');
console.log(`query_graph("RETURN 1") → ${text}  (${elapsed} ms on a pooled session)`);
console.log('pool.status():');
console.log(JSON.stringify(pool.status(), null, 2));
