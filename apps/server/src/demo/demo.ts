#!/usr/bin/env node
// `pnpm demo`: plays Grynya against a running Klym (`pnpm start`) with the official MCP client. It
// starts a task, shows its log while it runs, prints the final status, and shows the node Klym wrote
// into the graph. Exit 0 when the task completed and its write-back landed, 1 otherwise.
import { parseArgs } from 'node:util';
import { createSessionPool } from '@klym/core';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const HELP = `Usage: pnpm demo [--url URL] [--token TOKEN] [--grynya URL]

Plays Grynya against a running Klym: starts a task, shows its progress, prints the final status and
the node Klym wrote into the graph.

  --url URL       Klym's Streamable HTTP endpoint (default http://127.0.0.1:8765/mcp)
  --token TOKEN   bearer token, when Klym requires one (default: $KLYM_TOKEN, else none)
  --grynya URL    grynya-mcp-server's SSE endpoint, to show the node (default http://127.0.0.1:8000/sse)
  --prompt TEXT   the task's brief (default: a self-check of the graph and its tools)`;

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8765/mcp' },
    token: { type: 'string' },
    grynya: { type: 'string', default: 'http://127.0.0.1:8000/sse' },
    prompt: { type: 'string', default: 'Check that you can see the knowledge graph and its tools, and report what you see.' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

type Reply = Record<string, unknown> & { log?: { entries: { seq: number; type: string; text?: string }[]; next_cursor?: number } };
const terminal = new Set(['completed', 'error', 'cancelled']);
const token = values.token ?? process.env.KLYM_TOKEN;

// The v2 SDK's client, negotiating the newest protocol both sides speak (2026-07-28 with Klym).
const client = new Client({ name: 'grynya-demo', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
try {
  await client.connect(
    new StreamableHTTPClientTransport(new URL(values.url), token === undefined ? {} : { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
} catch (error) {
  console.error(`Could not reach Klym at ${values.url}: ${error instanceof Error ? error.message : String(error)}. Is \`pnpm start\` running?`);
  process.exit(1);
}

async function call(name: string, args: Record<string, unknown>): Promise<Reply> {
  const result = await client.callTool({ name, arguments: args });
  const reply = (result.structuredContent ?? {}) as Reply;
  if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(reply)}`);
  return reply;
}

console.log(`Grynya → Klym at ${values.url}`);
const asked = performance.now();
const started = await call('start_async_agent_task', { prompt: values.prompt, record_result: true });
const taskId = String(started.task_id);
console.log(`start_async_agent_task → task ${taskId} (${started.status}) in ${(performance.now() - asked).toFixed(1)} ms; Grynya is free to talk again.\n`);

let cursor = 0;
let status: Reply;
for (;;) {
  // Paging with log_after gives every entry once; a real Grynya would rather glance (no log_after).
  status = await call('check_task_status', { task_id: taskId, log_after: cursor, max_log_entries: 50 });
  for (const entry of status.log?.entries ?? []) console.log(`  #${entry.seq} ${entry.type}${describeEntry(entry)}`);
  cursor = status.log?.next_cursor ?? cursor;
  // The write-back runs after the task ends; its outcome lands in the same status.
  const writing = (status.write_back as { status?: string } | undefined)?.status === 'pending';
  if (terminal.has(String(status.status)) && !writing) break;
  await new Promise((resolve) => setTimeout(resolve, 200));
}
await client.close();

const final = { ...status };
delete final.log;
console.log(`\ncheck_task_status → ${JSON.stringify(final, null, 2)}`);

const writeBack = status.write_back as { status?: string; node_id?: string } | undefined;
if (writeBack?.status === 'written' && writeBack.node_id !== undefined) await showNode(writeBack.node_id);
process.exit(status.status === 'completed' && writeBack?.status === 'written' ? 0 : 1);

function describeEntry(entry: Record<string, unknown>): string {
  const { seq, type, time, ...rest } = entry;
  void seq;
  void type;
  void time;
  const text = typeof rest.text === 'string' ? rest.text : JSON.stringify(rest);
  return text === '{}' ? '' : `  ${text.length > 140 ? `${text.slice(0, 140)}…` : text}`;
}

/** Reads the node back from grynya-mcp-server, the way Grynya itself would find it. */
async function showNode(nodeId: string): Promise<void> {
  await using pool = await createSessionPool({
    upstreams: { grynya: { url: values.grynya, transport: 'sse', headers: { Host: 'localhost' }, pool: { min: 0 } } },
  });
  const query = async (cypher: string): Promise<string> => {
    const result = await pool.callTool('grynya', 'query_graph', { query: cypher }, { timeoutMs: 5_000 });
    return result.content.map((item) => (item.type === 'text' ? item.text : '')).join('');
  };
  try {
    console.log(`\nThe node Klym wrote, read back from grynya-mcp-server (${values.grynya}):`);
    console.log(`  ${await query(`MATCH (n:Analysis {id: '${nodeId}'}) RETURN n`)}`);
    console.log(`  ${await query(`MATCH (n {id: '${nodeId}'})-[r]->(m) RETURN type(r), m.id`)}`);
  } catch (error) {
    console.log(`  (could not read it back: ${error instanceof Error ? error.message : String(error)})`);
  }
}
