// `klym serve` and `klym serve --stdio`: the real CLI, its options taken from the configuration layers.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KLYM_MAIN, restCall, runKlym, startKlym, temporaryDirectory } from './cli-harness.ts';
import { startOidcIssuer } from './support/oidc-issuer.ts';

const FIXTURE = path.resolve(import.meta.dirname, 'support/stdio-fixture-server.ts');

let grynya: FakeGrynya;
const cwd = temporaryDirectory();
beforeAll(async () => {
  grynya = await createFakeGrynya();
});
afterAll(async () => {
  await grynya?.close();
  cwd[Symbol.dispose]();
});

const textOf = (result: Awaited<ReturnType<Client['callTool']>>): string =>
  (result.content as { type: string; text: string }[]).map((item) => item.text).join('');

describe('klym serve', () => {
  it('serves over HTTP with options from the config file, env and flags, and shuts down on SIGTERM with exit 0', async () => {
    writeFileSync(
      path.join(cwd.path, 'klym.config.yaml'),
      `upstreams:\n  grynya:\n    url: ${grynya.sseUrl}\n    transport: sse\nserver:\n  bodyLimitBytes: 4096\n`,
    );
    const klym = startKlym(['serve', '--port', '0'], {
      cwd: cwd.path,
      env: { KLYM_LLM_MODELS: 'compatible:llama3', KLYM_LLM_PROVIDERS_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1' },
    });
    try {
      const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      // server.bodyLimitBytes from the file reached the server.
      const large = await fetch(`${url}/api/tasks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'x'.repeat(5_000) }),
      });
      expect(large.status).toBe(413);

      const client = new Client({ name: 'cli-serve-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
      // The pool connects in the background: until grynya answers, describe_capabilities says it is connecting.
      const capabilities = async (): Promise<string> => textOf(await client.callTool({ name: 'describe_capabilities', arguments: {} }));
      await expect.poll(capabilities).toContain('grynya__query_graph');
      const described = await capabilities();
      // The models a caller may choose: the default and llm.models from the environment.
      expect(described).toContain('scripted');
      expect(described).toContain('compatible:llama3');
      await client.close();
    } finally {
      klym.child.kill('SIGTERM');
    }
    const { code } = await klym.exited();
    expect(code).toBe(0);
    // Its tasks are kept in .klym/tasks.db under the working directory, the default of `tasks.store`.
    expect(existsSync(path.join(cwd.path, '.klym', 'tasks.db'))).toBe(true);
  });

  it('--stdio serves one MCP client over stdin/stdout, its upstream given by --upstream', async () => {
    using directory = temporaryDirectory();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--conditions=klym-source', KLYM_MAIN, 'serve', '--stdio', '--upstream', `grynya=${grynya.mcpUrl}`],
      cwd: directory.path,
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'cli-stdio-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(
        expect.arrayContaining(['start_async_agent_task', 'check_task_status', 'cancel_agent_task', 'list_agent_tasks', 'describe_capabilities']),
      );
      // The pool connects in the background: until grynya answers, describe_capabilities says it is connecting.
      await expect.poll(async () => textOf(await client.callTool({ name: 'describe_capabilities', arguments: {} }))).toContain('grynya__query_graph');
    } finally {
      await client.close();
    }
  });

  it('logs what upstreams log, as [upstream level] message, and its own lines, only at or above logging.level', async () => {
    using directory = temporaryDirectory();
    writeFileSync(
      path.join(directory.path, 'klym.config.json'),
      JSON.stringify({ mcpServers: { fixture: { command: process.execPath, args: [FIXTURE] } }, tasks: { store: 'memory' } }),
    );
    const serveUntilReady = async (...args: string[]): Promise<string> => {
      const klym = startKlym(['serve', '--port', '0', ...args], { cwd: directory.path });
      const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
      // The fixture writes its `ready` line to stderr before it answers `initialize`.
      await expect.poll(async () => ((await (await fetch(`${url}/healthz`)).json()) as { status: string }).status, { timeout: 15_000 }).toBe('ok');
      klym.child.kill('SIGTERM');
      const { code, stderr } = await klym.exited();
      expect(code).toBe(0);
      return stderr;
    };
    const info = await serveUntilReady();
    // Not on a terminal: one JSON object a line, its message the line.
    const messages = info
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { level: string; msg: string });
    expect(messages).toContainEqual({ level: 'info', time: expect.any(String), msg: expect.stringMatching(/^\[fixture info\] stdio fixture ready, pid \d+$/) });
    expect(messages).toContainEqual(expect.objectContaining({ level: 'info', msg: expect.stringMatching(/^klym: shutting down/) }));
    const warning = await serveUntilReady('--set', 'logging.level=warning');
    expect(warning).not.toMatch(/fixture ready|shutting down/);
  });

  it('logs one JSON line per HTTP request: method, route pattern, status, duration and principal; never a token or the raw path', async () => {
    using directory = temporaryDirectory();
    const token = 'cli-log-token-0123456789abcdef';
    const metricsToken = 'cli-metrics-token-0123456789abcdef';
    const env = { KLYM_SERVER_TOKENS: JSON.stringify({ ops: token }), KLYM_METRICS_TOKEN: metricsToken, KLYM_TASKS_STORE: 'memory' };
    const klym = startKlym(['serve', '--port', '0'], { cwd: directory.path, env });
    try {
      const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect((await fetch(`${url}/api/tasks/no-such-task-id-42`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(404);
      expect((await fetch(`${url}/api/tasks`, { headers: { authorization: `Bearer ${metricsToken}` } })).status).toBe(401);
      expect((await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).status).toBe(200);
    } finally {
      klym.child.kill('SIGTERM');
    }
    const { code, stderr } = await klym.exited();
    expect(code).toBe(0);
    const requests = stderr
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => 'method' in entry)
      .map(({ time: _time, msg: _msg, durationMs, ...entry }) => ({ ...entry, timed: typeof durationMs === 'number' }));
    expect(requests).toEqual([
      { level: 'info', method: 'GET', route: '/healthz', status: 200, timed: true },
      { level: 'info', method: 'GET', route: '/api/tasks/:id', status: 404, principal: 'ops', timed: true },
      { level: 'info', method: 'GET', route: '/api/tasks', status: 401, timed: true },
      { level: 'info', method: 'GET', route: '/metrics', status: 200, principal: 'metrics', timed: true },
    ]);
    for (const secret of [token, metricsToken, 'no-such-task-id-42']) expect(stderr).not.toContain(secret);
  });

  it('stops at start-up when the task store cannot be opened: exit 1, one line naming the file and why', async () => {
    using directory = temporaryDirectory();
    mkdirSync(path.join(directory.path, 'tasks.db'));
    const { code, stdout, stderr } = await runKlym(['serve', '--port', '0'], { cwd: directory.path, env: { KLYM_TASKS_STORE: 'sqlite:tasks.db' } });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe(`klym: Cannot open the task store ${path.join(directory.path, 'tasks.db')}: it is a directory, not a file\n`);
  });

  it('takes server.oauth from the config file: the metadata names the issuer, and a JWT starts a task as its `sub`', async () => {
    await using issuer = await startOidcIssuer();
    using directory = temporaryDirectory();
    const resource = 'https://klym.example.com/mcp';
    writeFileSync(
      path.join(directory.path, 'klym.config.yaml'),
      `tasks:\n  store: memory\nserver:\n  oauth:\n    issuer: ${issuer.issuer}\n    resource: ${resource}\n`,
    );
    const klym = startKlym(['serve', '--port', '0'], { cwd: directory.path });
    try {
      const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
      expect(await (await fetch(`${url}/.well-known/oauth-protected-resource`)).json()).toMatchObject({ resource, authorization_servers: [issuer.issuer] });
      expect((await fetch(`${url}/api/tasks`)).status).toBe(401);
      const token = await issuer.sign({ aud: resource, sub: 'alice', scope: 'klym:start klym:read' });
      const started = await restCall(url, '/api/tasks', token, { prompt: 'from the CLI' });
      expect(started.status).toBe(202);
      expect(
        (await restCall(url, `/api/tasks/${String(started.json.task_id)}`, await issuer.sign({ aud: resource, sub: 'bob', scope: 'klym:read' }))).status,
      ).toBe(404);
    } finally {
      klym.child.kill('SIGTERM');
    }
    expect((await klym.exited()).code).toBe(0);
  });

  it('refuses a non-loopback host without tokens: exit 1, one line naming the key and the flag', async () => {
    const { code, stdout, stderr } = await runKlym(['serve', '--host', '0.0.0.0', '--port', '0'], { cwd: cwd.path });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe(
      'klym: Invalid configuration: server.host = "0.0.0.0": binding "0.0.0.0" (not loopback) needs `server.tokens` or `server.oauth` (flag --host)\n',
    );
  });
});
