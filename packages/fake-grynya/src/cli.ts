#!/usr/bin/env node
// fake-grynya [--port 8000] [--host 127.0.0.1] [--allowed-hosts localhost,grynya-mcp-server] [--delay-ms 0] [--events N [--seed 1]]
// Serves the fake grynya-mcp-server until SIGINT/SIGTERM. Prints one line with both URLs when it listens.
import { parseArgs } from 'node:util';
import { MAX_EVENTS } from './big-graph.ts';
import { createFakeGrynya } from './fake-grynya.ts';

const USAGE = `Usage: fake-grynya [--port 8000] [--host 127.0.0.1] [--allowed-hosts localhost,…] [--delay-ms 0] [--events N [--seed 1]]

Serves legacy HTTP+SSE at /sse, Streamable HTTP at /mcp, and GET /health. Tool answers are written as
grynya-mcp-server's Python json.dumps writes them: one line, ", " and ": ", non-ASCII as \\uXXXX.

  --events N   hold a big graph of N Event nodes (0 to ${MAX_EVENTS}): query_graph answers
               MATCH (e:Event) RETURN e with N rows {"e": {id, label, service, severity, day, trace_id, message}}
               on one line, about 180 bytes a row (120000 make about 21 MB); WHERE e.<property> = '<value>'
               and LIMIT <k> work too. The answer is serialized once, at start.
  --seed S     which events, the same ones for the same N and S (0 to 4294967295). Default 1.`;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8000' },
    host: { type: 'string', default: '127.0.0.1' },
    'allowed-hosts': { type: 'string' },
    'delay-ms': { type: 'string', default: '0' },
    events: { type: 'string' },
    seed: { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(USAGE);
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
// `Number('')` is 0: an empty flag is refused, not taken for zero.
const events = values.events === undefined ? undefined : values.events.trim() === '' ? Number.NaN : Number(values.events);
if (events !== undefined && (!Number.isInteger(events) || events < 0 || events > MAX_EVENTS)) {
  console.error(`fake-grynya: expected --events to be an integer from 0 to ${MAX_EVENTS}, got ${JSON.stringify(values.events)}`);
  process.exit(1);
}
const seed = values.seed.trim() === '' ? Number.NaN : Number(values.seed);
if (!Number.isInteger(seed) || seed < 0 || seed > 0xffff_ffff) {
  console.error(`fake-grynya: expected --seed to be an integer from 0 to 4294967295, got ${JSON.stringify(values.seed)}`);
  process.exit(1);
}
const allowedHosts = values['allowed-hosts']
  ?.split(',')
  .map((name) => name.trim())
  .filter(Boolean);
const grynya = await createFakeGrynya({
  port,
  host: values.host,
  ...(allowedHosts === undefined ? {} : { allowedHosts }),
  ...(events === undefined ? {} : { bigGraph: { events, seed } }),
});
grynya.faults.delayMs = delayMs;
const bigGraph = events === undefined ? '' : `  big graph: ${events} events, seed ${seed}`;
console.log(`fake grynya-mcp-server: SSE ${grynya.sseUrl}  Streamable HTTP ${grynya.mcpUrl}${bigGraph}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void grynya.close().then(() => process.exit(0)));
}
