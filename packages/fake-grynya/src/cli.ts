#!/usr/bin/env node
// fake-grynya [--port 8000] [--host 127.0.0.1] [--allowed-hosts localhost,grynya-mcp-server] [--delay-ms 0]
// Serves the fake grynya-mcp-server until SIGINT/SIGTERM. Prints one line with both URLs when it listens.
import { parseArgs } from 'node:util';
import { createFakeGrynya } from './fake-grynya.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8000' },
    host: { type: 'string', default: '127.0.0.1' },
    'allowed-hosts': { type: 'string' },
    'delay-ms': { type: 'string', default: '0' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log('Usage: fake-grynya [--port 8000] [--host 127.0.0.1] [--allowed-hosts localhost,…] [--delay-ms 0]\n\nServes legacy HTTP+SSE at /sse, Streamable HTTP at /mcp, and GET /health.');
  process.exit(0);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  console.error(`fake-grynya: expected --port to be an integer from 0 to 65535, got ${JSON.stringify(values.port)}`);
  process.exit(1);
}
const delayMs = Number(values['delay-ms']);
if (!Number.isInteger(delayMs) || delayMs < 0) {
  console.error(`fake-grynya: expected --delay-ms to be a non-negative integer, got ${JSON.stringify(values['delay-ms'])}`);
  process.exit(1);
}
const allowedHosts = values['allowed-hosts']?.split(',').map((name) => name.trim()).filter(Boolean);
const grynya = await createFakeGrynya({ port, host: values.host, ...(allowedHosts === undefined ? {} : { allowedHosts }) });
grynya.faults.delayMs = delayMs;
console.log(`fake grynya-mcp-server: SSE ${grynya.sseUrl}  Streamable HTTP ${grynya.mcpUrl}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void grynya.close().then(() => process.exit(0)));
}
