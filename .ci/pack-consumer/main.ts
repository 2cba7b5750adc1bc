// An agent that installed @klym/core from its tarball: its entry points, typed, and working.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  createSessionPool,
  createTaskManager,
  createTaskService,
  isTerminal,
  KlymError,
  openTaskBackend,
  runAgent,
  SELF_CHECK_OK,
  type SessionPool,
} from '@klym/core';
import { createArtifactQuery, createArtifactStore, createMemoryArtifacts } from '@klym/core/artifacts';
import { createThreadRunner } from '@klym/core/engine';
import { registerTaskTools, TASK_TOOLS_INSTRUCTIONS } from '@klym/core/mcp';
import { createRedisTaskStore } from '@klym/core/redis';
import { createInMemoryUpstream } from '@klym/core/testing';
import { Client } from '@modelcontextprotocol/client';
import { InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

function echoServer(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

const pool: SessionPool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(echoServer) } });
const listing = await pool.listTools();
const result = await pool.callTool('demo', 'echo', { text: 'from the tarball' });
// The agent loop with the offline scripted model (no key, no network) and the task manager over it.
const run = await runAgent({ pool, prompt: 'self-check', model: 'scripted', readOnlyTools: ['demo__echo'], upstreamTools: { demo: { probe: { tool: 'echo', args: { text: 'probe' } } } } });
const tasks = createTaskManager({ pool });
const started = await tasks.start({ prompt: 'self-check', model: 'scripted' }, { principal: 'consumer' });
let task = await tasks.get(started.id, { principal: 'consumer' });
while (!isTerminal(task.status)) {
  await new Promise((resolve) => setTimeout(resolve, 10));
  task = await tasks.get(started.id, { principal: 'consumer' });
}
await tasks.close();
// The runner thread loads its entry from the built dist (runner-thread.js) and runs the scripted model there.
const runner = createThreadRunner({ upstreams: {} });
const threaded = await runner({ pool, prompt: 'self-check', model: 'scripted' });
await runner.close();
// The six task tools on this agent's own MCP server, called by the SDK's client, over a SQLite task
// backend (openTaskBackend loads the SQLite store from the built dist by a dynamic import).
const dataDir = mkdtempSync(path.join(tmpdir(), 'klym-consumer-'));
const backend = await openTaskBackend(`sqlite:${path.join(dataDir, 'tasks.db')}`);
const service = createTaskService({ pool, store: backend.store, queue: backend.queue, shutdownGraceMs: 0 });
const server = new McpServer({ name: 'consumer', version: '1.0.0' }, { capabilities: { logging: {} }, instructions: TASK_TOOLS_INSTRUCTIONS });
registerTaskTools(server, service);
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
await server.connect(serverSide);
const client = new Client({ name: 'consumer-client', version: '1.0.0' });
await client.connect(clientSide);
const served = (await client.listTools()).tools.map((tool) => tool.name);
const described = (await client.callTool({ name: 'describe_capabilities', arguments: {} })).structuredContent as { tools?: { name: string }[] } | undefined;
await client.close();
await service.close();
await backend.close();
const sqliteKept = existsSync(path.join(dataDir, 'tasks.db'));
rmSync(dataDir, { recursive: true, force: true });
await pool.close();
const closed = await pool.callTool('demo', 'echo', { text: 'late' }).catch((error: unknown) => error);
// SQL over a JSON result kept as records: DuckDB's native binding installs with the tarball's dependencies.
const kept = createMemoryArtifacts();
const { id: records } = await createArtifactStore({ backend: kept }).put('demo__echo', JSON.stringify({ status: 'success', results: [{ a: 1 }, { a: 2 }] }));
const duck = createArtifactQuery({ source: kept });
const summed = (await duck.query(`SELECT sum(a) AS s FROM ${records}`)).rows[0]?.[0];
await duck.close();
// The Redis store's subpath loads ioredis from the tarball's dependencies; nothing listens on port 1.
const redis = await createRedisTaskStore({ url: 'redis://127.0.0.1:1/0', connectTimeoutMs: 500 }).then(() => undefined, (error: unknown) => error);

const text = (result.content as { text: string }[])[0]?.text;
const ran = run.text.startsWith(SELF_CHECK_OK) && task.status === 'completed' && threaded.finishReason === 'stop' && threaded.model === 'scripted';
const mcp = served.length === 8 && served.includes('query_task_artifact') && served.includes('reply_to_agent_task') && described?.tools?.[0]?.name === 'demo__echo' && sqliteKept;
const redisRefused = redis instanceof KlymError && redis.code === 'STORE_UNAVAILABLE';
if (listing.tools[0]?.name !== 'demo__echo' || text !== 'from the tarball' || !(closed instanceof KlymError) || closed.code !== 'POOL_CLOSED' || !ran || !mcp || !redisRefused || summed !== 3) {
  console.error('consumer check failed', { tools: listing.tools.map((tool) => tool.name), text, closed, run: run.text, task: task.status, threaded, served, described, sqliteKept, redis, summed });
  process.exit(1);
}
console.log(`consumer check passed: ${listing.tools[0].name} answered ${JSON.stringify(text)}; runAgent (scripted): ${run.finishReason}, ${run.steps} steps; task ${task.status}; on the runner thread: ${threaded.finishReason}, ${threaded.steps} step(s); after close: ${closed.code}; @klym/core/mcp served ${served.length} tools over a SQLite task backend; @klym/core/redis refused an unreachable Redis with ${redis.code}; DuckDB summed ${records}'s records to ${summed}`);
