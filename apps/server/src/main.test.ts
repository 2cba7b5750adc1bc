import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';

const main = path.join(import.meta.dirname, 'main.ts');
const demo = path.join(import.meta.dirname, 'demo/demo.ts');
// pnpm start keeps its tasks under the working directory: a temporary one, never the repository.
const cwd = mkdtempSync(path.join(tmpdir(), 'klym-start-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

function start(args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['--conditions=klym-source', ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

describe('pnpm start (the embedded default) and pnpm demo', () => {
  it('serves Klym over the fake grynya with the scripted model; the demo plays Grynya end to end; SIGTERM shuts down cleanly', async () => {
    const server = start([main]);
    const printed = /Play Grynya from another terminal: {2}pnpm demo(.*)\n/;
    await vi.waitFor(
      () => {
        if (server.child.exitCode !== null) throw new Error(`pnpm start exited with ${server.child.exitCode}: ${server.output()}`);
        expect(server.output()).toMatch(printed);
      },
      { timeout: 15_000, interval: 20 },
    );
    const [, demoArgs = ''] = server.output().match(printed) as RegExpMatchArray;
    expect(server.output()).toMatch(/Klym is serving MCP at http:\/\/127\.0\.0\.1:\d+\/mcp/);
    expect(server.output()).toMatch(/fake grynya-mcp-server: http:\/\/127\.0\.0\.1:\d+\/sse/);
    expect(server.output()).toContain('its graph holds 20,000 Event rows: MATCH (e:Event) RETURN e answers them on one line');

    // The printed command, run as printed (pnpm demo = node demo.ts).
    const player = start([demo, ...demoArgs.trim().split(/\s+/).filter(Boolean)]);
    const [code] = (await once(player.child, 'exit')) as [number | null];
    const output = player.output();
    expect({ code, output }).toMatchObject({ code: 0 });
    expect(output).toMatch(/start_async_agent_task → task \S+ \(pending|running\)/);
    expect(output).toMatch(/tool-call .*grynya__query_graph/);
    expect(output).toContain('"status": "completed"');
    expect(output).toContain('Бачу базу та інструменти, полет нормальний');
    // The node Klym wrote, read back from the fake's graph, linked to its day.
    const taskId = (output.match(/"task_id": "([^"]+)"/) as RegExpMatchArray)[1];
    expect(output).toContain(`"id": "klym_${taskId}"`);
    expect(output).toMatch(/"type\(r\)": "HAPPENED_AT", "m\.id": "d_\d{4}_\d{2}_\d{2}"/);

    server.child.kill('SIGTERM');
    const [serverCode] = (await once(server.child, 'exit')) as [number | null];
    expect(serverCode).toBe(0);
    // The task outlives the process: it is in the store under the working directory.
    expect(existsSync(path.join(cwd, '.klym', 'tasks.db'))).toBe(true);
  });
});
