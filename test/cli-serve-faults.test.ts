// `klym serve` as a process under faults (issue #11): a shutdown that still answers the pollers it
// promises to, and a process-level safety net for unhandled rejections and uncaught exceptions.
import http from 'node:http';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKlym, temporaryDirectory, type KlymProcess } from './cli-harness.ts';

const FAULT_INJECTOR = path.resolve(import.meta.dirname, 'support/fault-injector.ts');
const TOKEN = 'token-of-grynya-0123456789';

let grynya: FakeGrynya;
beforeAll(async () => {
  grynya = await createFakeGrynya();
});
afterAll(async () => {
  await grynya?.close();
});

/** `klym serve` on a free port over the fake grynya (legacy SSE); resolves with its base URL once it serves. */
async function serve(
  cwd: string,
  options: { args?: string[]; env?: Record<string, string>; nodeArgs?: string[] } = {},
): Promise<{ klym: KlymProcess; url: string }> {
  const klym = startKlym(
    ['serve', '--port', '0', '--upstream', `grynya=${grynya.sseUrl}`, '--set', 'upstreams.grynya.transport=sse', ...(options.args ?? [])],
    {
      cwd,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.nodeArgs === undefined ? {} : { nodeArgs: options.nodeArgs }),
    },
  );
  const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
  return { klym, url };
}

/** What one REST request over `agent` answered, and whether it went over a connection opened before. */
interface RestAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly reusedSocket: boolean;
}

function rest(agent: http.Agent, url: string, method = 'GET', body?: unknown): Promise<RestAnswer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, agent, headers: { 'content-type': 'application/json' } }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown>, reusedSocket: request.reusedSocket }),
      );
    });
    request.on('error', reject);
    request.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('klym serve shutting down', () => {
  it('serves polls during the grace period on a keep-alive connection opened before SIGTERM (and on new ones), then ends the task cancelled with the reason shutdown', async () => {
    using cwd = temporaryDirectory();
    grynya.faults.hang = true;
    // One socket, kept alive: every request below goes over the connection the first one opened.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { klym, url } = await serve(cwd.path, { args: ['--set', 'tasks.shutdownGraceMs=1500'] });
      const mcp = new Client({ name: 'grynya', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
      const logged: unknown[] = [];
      mcp.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void logged.push(notification.params.data));
      const started = await mcp.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Self-check' } });
      const taskId = String((started.structuredContent as { task_id: string }).task_id);
      const task = `${url}/api/tasks/${taskId}`;
      await expect.poll(async () => (await rest(agent, task)).body.step, { timeout: 10_000 }).toMatch(/calling grynya__query_graph/);

      klym.child.kill('SIGTERM');
      await klym.waitFor(/shutting down/, 'stderr');
      const during = await rest(agent, task);
      expect(during).toMatchObject({ status: 200, reusedSocket: true, body: { status: 'running' } });
      // A new connection is served too (a client's pool may open one at any time); new work is refused.
      const fresh = new http.Agent({ keepAlive: false });
      expect(await rest(fresh, task)).toMatchObject({ status: 200, reusedSocket: false, body: { status: 'running' } });
      expect(await rest(fresh, `${url}/api/tasks`, 'POST', { prompt: 'more' })).toMatchObject({ status: 503, body: { error: { code: 'SHUTTING_DOWN' } } });
      // The cancel at the end of the grace period reaches the session that started the task, with its reason.
      await expect.poll(() => logged, { timeout: 10_000 }).toContainEqual(`task ${taskId} ended: cancelled (shutdown)`);
      expect((await klym.exited()).code).toBe(0);
      expect(grynya.stats.cancelled).toBeGreaterThanOrEqual(1);
      await mcp.close().catch(() => {});

      // The task store kept it: the next start answers the same poll with the reason.
      grynya.faults.hang = false;
      const again = await serve(cwd.path);
      try {
        expect(await rest(agent, `${again.url}/api/tasks/${taskId}`)).toMatchObject({ status: 200, body: { status: 'cancelled', cancel_reason: 'shutdown' } });
      } finally {
        again.klym.child.kill('SIGTERM');
        await again.klym.exited();
      }
    } finally {
      grynya.faults.hang = false;
      agent.destroy();
    }
  });
});

/** The environment of a `klym serve` with the fault injector: which fault, and a configured token for it to carry. */
const env = (kind: 'rejection' | 'exception') => ({ INJECT_FAULT: kind, INJECT_FAULT_SECRET: TOKEN, KLYM_SERVER_TOKENS: JSON.stringify({ grynya: TOKEN }) });

describe('klym serve under process faults', () => {
  it('logs an unhandled rejection as one redacted line and keeps serving', async () => {
    using cwd = temporaryDirectory();
    const { klym, url } = await serve(cwd.path, { env: env('rejection'), nodeArgs: ['--import', FAULT_INJECTOR] });
    try {
      klym.child.kill('SIGUSR2');
      // One JSON line (stderr is not a terminal), its message the line.
      const [, line] = (await klym.waitFor(/^\{"level":"error",.*"msg":"(klym: unhandled rejection.*)"\}$/m, 'stderr')) as [string, string];
      expect(line).toMatch(
        /^klym: unhandled rejection \(logged; serving goes on\): Error: injected rejection; .*Authorization: \[redacted\].* \(at .*fault-injector\.ts:\d+:\d+\)\)$/,
      );
      expect(klym.stderr()).not.toContain(TOKEN);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const listed = await fetch(`${url}/api/tasks`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(listed.status).toBe(200);
      expect(klym.child.exitCode).toBeNull();
    } finally {
      klym.child.kill('SIGTERM');
    }
    expect((await klym.exited()).code).toBe(0);
  });

  it('on an uncaught exception logs one redacted line, shuts down gracefully and exits 2', async () => {
    using cwd = temporaryDirectory();
    const { klym, url } = await serve(cwd.path, { env: env('exception'), nodeArgs: ['--import', FAULT_INJECTOR] });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    klym.child.kill('SIGUSR2');
    const { code, stderr } = await klym.exited();
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /^\{"level":"critical",.*"msg":"klym: uncaught exception; shutting down \(running tasks get a grace period, then are cancelled\): Error: injected exception; .*Authorization: \[redacted\].*"\}$/m,
    );
    expect(stderr).not.toContain(TOKEN);
    // One line, not Node's stack trace.
    expect(stderr).not.toMatch(/^\s+at /m);
  });
});
