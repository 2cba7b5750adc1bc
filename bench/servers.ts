import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, '..');

/** An upstream running in its own process, as it would in production. */
export interface ChildServer {
  readonly sseUrl: string;
  readonly mcpUrl: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts the fake grynya-mcp-server's CLI in a child process on an ephemeral port. */
export function startFakeGrynyaProcess(options: { delayMs?: number } = {}): Promise<ChildServer> {
  const child = spawn(
    process.execPath,
    ['--conditions=klym-source', path.join(root, 'packages/fake-grynya/src/cli.ts'), '--port', '0', '--delay-ms', String(options.delayMs ?? 0)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let output = '';
    child.once('exit', (code) => reject(new Error(`fake grynya exited with ${code}: ${output}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const urls = output.match(/http:\/\/\S+\/sse\b.*?(http:\/\/\S+\/mcp)\b/);
      if (urls?.[0] === undefined || urls[1] === undefined) return;
      const sseUrl = (urls[0].match(/http:\/\/\S+\/sse/) as RegExpMatchArray)[0];
      resolve({ sseUrl, mcpUrl: urls[1], child, stop: () => stopChild(child) });
    });
  });
}

/** Starts a 2026-07-28 (stateless) upstream, the v2 SDK's `createMcpHandler`, in a child process on an ephemeral port. */
export function startMcp20260728UpstreamProcess(): Promise<{ readonly url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--conditions=klym-source', path.join(root, 'bench/mcp-2026-07-28-child.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.once('exit', (code) => reject(new Error(`the 2026-07-28 upstream exited with ${code}: ${output}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const url = /2026-07-28 upstream at (http:\/\/\S+\/mcp)/.exec(output)?.[1];
      if (url !== undefined) resolve({ url, stop: () => stopChild(child) });
    });
  });
}

/** The command line that runs `@modelcontextprotocol/server-everything` over stdio. */
export function serverEverythingStdio(): { command: string; args: string[] } {
  const entry = path.join(path.dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');
  return { command: process.execPath, args: [entry, 'stdio'] };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
