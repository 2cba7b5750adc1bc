import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { KLYM_TOOLS, payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';
import { packageFile } from './support/upstream-servers.ts';

const ALL_WELL = 'Бачу базу та інструменти, полет нормальний';
const script = path.join(import.meta.dirname, 'support', 'server-start.ts');
const nodeArgs = ['--conditions=klym-source', script];
const run = promisify(execFile);

const cleanups: (() => Promise<unknown>)[] = [];
let harness: ServerHarness | undefined;
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
  await harness?.cleanup();
  harness = undefined;
});

/** Starts test/support/server-start.ts over HTTP and reads the URLs it prints. */
async function spawnServer(...args: string[]): Promise<{ child: ChildProcess; mcpUrl: string; stderr: () => string }> {
  const child = spawn(process.execPath, [...nodeArgs, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
  const [line] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  const { mcpUrl } = JSON.parse(line.toString()) as { mcpUrl: string };
  return { child, mcpUrl, stderr: () => stderr };
}

/** Runs the MCP Inspector's CLI mode (`mcp-inspector --cli …`) and parses the JSON it prints. */
async function inspector(...args: string[]): Promise<Record<string, unknown>> {
  const bin = packageFile('@modelcontextprotocol/inspector', 'clients/launcher/build/index.js');
  const { stdout } = await run(process.execPath, [bin, '--cli', ...args], { timeout: 30_000, cwd: import.meta.dirname });
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** Polls the task's status with the Inspector over a 2025-11-25 session until it completed. */
const untilCompleted = (url: string, taskId: string): Promise<void> =>
  expect
    .poll(
      async () =>
        (
          (await inspector(url, '--method', 'tools/call', '--tool-name', 'check_task_status', '--tool-arg', `task_id=${taskId}`)) as {
            structuredContent: { status: string };
          }
        ).structuredContent.status,
      {
        timeout: 20_000,
        interval: 200,
      },
    )
    .toBe('completed');

describe('Klym as a process', () => {
  it('serves the journey over --stdio to the official client', async () => {
    const transport = new StdioClientTransport({ command: process.execPath, args: [...nodeArgs, '--stdio'], stderr: 'pipe' });
    const client = new Client({ name: 'grynya', version: '1.0.0' });
    await client.connect(transport);
    cleanups.push(() => client.close());
    const started = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Self-check' } }));
    const done = await waitForEnd(client, String(started.task_id));
    expect(done).toMatchObject({ status: 'completed' });
    expect(String(done.result)).toMatch(new RegExp(`^${ALL_WELL}`, 'm'));
  });

  it('on SIGTERM gives running tasks their grace period, cancels them with "shutdown", cancels the upstream call, and exits 0', async () => {
    const server = await spawnServer('--hang', '--grace', '300');
    const client = new Client({ name: 'grynya', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl)));
    const { task_id: taskId } = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Self-check' } }));
    await expect
      .poll(async () => payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).step)
      .toMatch(/calling grynya__query_graph/);

    const before = performance.now();
    const exited = once(server.child, 'exit');
    server.child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    expect(performance.now() - before).toBeGreaterThanOrEqual(250);
    expect(performance.now() - before).toBeLessThan(8_000);
    const line =
      server
        .stderr()
        .split('\n')
        .find((text) => text.startsWith('klym-test-exit ')) ?? '';
    const report = JSON.parse(line.slice('klym-test-exit '.length)) as {
      tasks: { id: string; status: string; cancelReason?: string }[];
      grynyaCancelled: number;
    };
    expect(report.tasks).toEqual([{ id: taskId, status: 'cancelled', cancelReason: 'shutdown' }]);
    expect(report.grynyaCancelled).toBeGreaterThanOrEqual(1);
    await client.close();
  });
});

describe('the MCP Inspector CLI against a running Klym', () => {
  it('lists the tools over Streamable HTTP and runs a task over legacy SSE', async () => {
    harness = await startHarness();
    const listed = (await inspector(harness.server.mcpUrl, '--method', 'tools/list')) as { tools: { name: string }[] };
    expect(listed.tools.map((tool) => tool.name).toSorted()).toEqual([...KLYM_TOOLS]);

    const started = (await inspector(
      harness.server.sseUrl,
      '--method',
      'tools/call',
      '--tool-name',
      'start_async_agent_task',
      '--tool-arg',
      'prompt=Self-check',
    )) as {
      structuredContent: { task_id: string };
    };
    const taskId = started.structuredContent.task_id;
    // Ownership is by principal, not session: a new Inspector session over the other transport sees it.
    await untilCompleted(harness.server.mcpUrl, taskId);
    const capabilities = (await inspector(harness.server.mcpUrl, '--method', 'tools/call', '--tool-name', 'describe_capabilities')) as {
      structuredContent: Record<string, unknown>;
    };
    expect(capabilities.structuredContent).toMatchObject({ models: ['scripted'], upstreams: { grynya: { state: 'ready', tools: 5 } } });
    expect((capabilities.structuredContent.tools as { name: string }[]).map((tool) => tool.name)).toContain('grynya__query_graph');
  });

  it('speaks 2026-07-28 to Klym when told to: the same tools, and a task it started read back in the 2025 era', async () => {
    harness = await startHarness();
    // The Inspector's `--protocol-era modern` is its name for 2026-07-28.
    const inspectorMcp20260728 = (...args: string[]) => inspector(harness!.server.mcpUrl, '--protocol-era', 'modern', ...args);
    const listed = (await inspectorMcp20260728('--method', 'tools/list')) as { tools: { name: string }[] };
    expect(listed.tools.map((tool) => tool.name).toSorted()).toEqual([...KLYM_TOOLS]);
    const started = (await inspectorMcp20260728('--method', 'tools/call', '--tool-name', 'start_async_agent_task', '--tool-arg', 'prompt=Self-check')) as {
      structuredContent: { task_id: string };
    };
    const taskId = started.structuredContent.task_id;
    await untilCompleted(harness.server.mcpUrl, taskId);
  });
});
