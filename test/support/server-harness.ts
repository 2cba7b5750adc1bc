import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startKlymServer, type KlymServerOptions, type RunningKlymServer } from '../../apps/server/src/server/index.ts';

/** Every tool Klym's /mcp lists, sorted, as a client sees their names on the wire: the eight task tools and `run_agent_task`. */
export const KLYM_TOOLS = [
  'cancel_agent_task',
  'check_task_status',
  'describe_capabilities',
  'list_agent_tasks',
  'query_task_artifact',
  'read_task_artifact',
  'reply_to_agent_task',
  'run_agent_task',
  'start_async_agent_task',
] as const;

/** A fake grynya and a Klym server over it (legacy SSE, like the real deployment), for one test. */
export interface ServerHarness {
  readonly grynya: FakeGrynya;
  readonly server: RunningKlymServer;
  /** The official SDK client, as Grynya, over `kind`; closed at cleanup. */
  connect(kind: 'streamable-http' | 'sse', token?: string): Promise<Client>;
  cleanup(): Promise<void>;
}

/** Starts the fake grynya and Klym on loopback ports. */
export async function startHarness(options: Partial<KlymServerOptions> = {}): Promise<ServerHarness> {
  const grynya = await createFakeGrynya();
  const server = await startKlymServer({
    port: 0,
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', timeouts: { requestMs: 30_000 } } },
    log: () => {},
    ...options,
    tasks: { shutdownGraceMs: 200, ...options.tasks },
  });
  const clients: Client[] = [];
  return {
    grynya,
    server,
    async connect(kind, token) {
      const requestInit = token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } };
      const transport =
        kind === 'sse'
          ? new SSEClientTransport(new URL(server.sseUrl), { requestInit })
          : new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit });
      const client = new Client({ name: 'grynya', version: '1.0.0' });
      await client.connect(transport);
      clients.push(client);
      return client;
    },
    async cleanup() {
      await Promise.allSettled(clients.map((client) => client.close()));
      await server.close();
      await grynya.close();
    },
  };
}

/** The JSON a Klym tool answered (its text item), checked to equal `structuredContent`. */
export function payload(result: unknown): Record<string, unknown> {
  const { content, structuredContent } = result as CallToolResult;
  const [item] = content;
  if (item?.type !== 'text') throw new Error(`Expected one text item, got ${JSON.stringify(content)}`);
  const parsed = JSON.parse(item.text) as Record<string, unknown>;
  if (JSON.stringify(parsed) !== JSON.stringify(structuredContent)) throw new Error('The text and structuredContent differ');
  return parsed;
}

/** Polls `check_task_status` until the task is terminal (or `timeoutMs` passes). */
export async function waitForEnd(client: Client, taskId: string, timeoutMs = 15_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }));
    if (['completed', 'error', 'cancelled'].includes(String(status.status))) return status;
    if (Date.now() > deadline) throw new Error(`Task ${taskId} still ${String(status.status)} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
