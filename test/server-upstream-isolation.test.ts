import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runAgent } from '@klym/core';
import { createScriptedModel, type ScriptedStep } from '@klym/core/internal';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createKlymApp, type KlymApp, type KlymServerOptions } from '../apps/server/src/server/index.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const GRYNYA_TOKEN = 'grynya-token-must-stay-with-klym-42';

/** A stateless Streamable HTTP upstream with tools `echo` and `wipe` that records every request's headers and every call. */
async function recordingUpstream(): Promise<{ url: string; headers: Record<string, string | string[] | undefined>[]; calls: string[] }> {
  const headers: Record<string, string | string[] | undefined>[] = [];
  const calls: string[] = [];
  const http: Server = createServer(async (request, response) => {
    headers.push(request.headers);
    const server = new McpServer({ name: 'recorder', version: '1.0.0' });
    for (const name of ['echo', 'wipe']) {
      server.registerTool(name, { annotations: { readOnlyHint: name === 'echo' } }, () => {
        calls.push(name);
        return { content: [{ type: 'text', text: `${name} done` }] };
      });
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on('close', () => void server.close());
    await server.connect(transport);
    await transport.handleRequest(request, response);
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  cleanups.push(() => new Promise((resolve) => http.close(resolve)));
  http.unref();
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, headers, calls };
}

async function klymWith(url: string, steps: readonly ScriptedStep[], options: Partial<KlymServerOptions> = {}): Promise<KlymApp> {
  const klym = await createKlymApp({
    upstreams: { rec: { url, transport: 'streamable-http', headers: { 'X-Upstream-Key': 'the-upstream-own-key' } } },
    auth: { tokens: { grynya: GRYNYA_TOKEN } },
    log: () => {},
    ...options,
    tasks: { run: (runOptions) => runAgent({ ...runOptions, model: createScriptedModel({ steps }) }), shutdownGraceMs: 0, ...options.tasks },
  });
  cleanups.push(() => klym.close());
  return klym;
}

async function runTask(klym: KlymApp, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const headers = { authorization: `Bearer ${GRYNYA_TOKEN}`, 'content-type': 'application/json' };
  const started = (await (await klym.app.request('/api/tasks', { method: 'POST', headers, body: JSON.stringify(body) })).json()) as { task_id: string };
  let status: Record<string, unknown> = {};
  await expect
    .poll(
      async () => {
        status = (await (await klym.app.request(`/api/tasks/${started.task_id}`, { headers })).json()) as Record<string, unknown>;
        return status.status;
      },
      { timeout: 10_000 },
    )
    .toMatch(/completed|error|cancelled/);
  return status;
}

describe('what reaches an upstream', () => {
  it("never forwards Grynya's bearer token; the upstream gets only its own configured headers", async () => {
    const upstream = await recordingUpstream();
    const klym = await klymWith(upstream.url, [{ toolCalls: [{ toolName: 'rec__echo', args: {} }] }, { text: 'echoed' }]);
    expect(await runTask(klym, { prompt: 'echo' })).toMatchObject({ status: 'completed', result: 'echoed' });
    expect(upstream.calls).toEqual(['echo']);
    expect(upstream.headers.length).toBeGreaterThan(0);
    for (const headers of upstream.headers) {
      expect(JSON.stringify(headers)).not.toContain(GRYNYA_TOKEN);
      expect(headers.authorization).toBeUndefined();
      expect(headers['x-upstream-key']).toBe('the-upstream-own-key');
    }
  });

  it("keeps a caller's `tools` inside the server's selection: a tool outside both is never called", async () => {
    const upstream = await recordingUpstream();
    const steps: ScriptedStep[] = [{ toolCalls: [{ toolName: 'rec__wipe', args: {} }] }, { text: 'tried' }];
    const klym = await klymWith(upstream.url, steps, { tasks: { tools: { allow: ['rec__*'] } } });
    const done = await runTask(klym, { prompt: 'wipe', tools: { allow: ['rec__echo'] } });
    expect(done.status).toBe('completed');
    expect(upstream.calls).toEqual([]);

    const readOnly = await klymWith(upstream.url, steps, { tasks: { tools: { policy: 'read-only' } } });
    expect((await runTask(readOnly, { prompt: 'wipe', tools: { allow: ['rec__*'] } })).status).toBe('completed');
    expect(upstream.calls).toEqual([]);
  });
});
