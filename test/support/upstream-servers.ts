import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

/** Absolute path of a package's file, resolved from the workspace root. */
export function packageFile(packageName: string, file: string): string {
  return path.join(path.dirname(require.resolve(`${packageName}/package.json`)), file);
}

/** A port that was free a moment ago, for servers that cannot listen on port 0 and tell which port they got. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A server process started for a test. */
export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Kills it (SIGKILL when `hard`) and waits for the exit. */
  stop(options?: { hard?: boolean }): Promise<void>;
}

/**
 * Starts `@modelcontextprotocol/server-everything` (a server nobody here wrote) over `sse` or
 * `streamableHttp` on a loopback port, and waits until it says it listens.
 */
export async function startServerEverything(transport: 'sse' | 'streamableHttp', port?: number): Promise<RunningServer> {
  const chosen = port ?? (await freePort());
  const child = spawn(process.execPath, [packageFile('@modelcontextprotocol/server-everything', 'dist/index.js'), transport], {
    env: { PATH: process.env.PATH ?? '', PORT: String(chosen) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await waitForLine(child, /listening on port|running on port/i, 10_000);
  const url = `http://127.0.0.1:${chosen}/${transport === 'sse' ? 'sse' : 'mcp'}`;
  return {
    url,
    port: chosen,
    child,
    async stop({ hard = false } = {}) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill(hard ? 'SIGKILL' : 'SIGTERM');
      await exited;
    },
  };
}

function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => finish(new Error(`server did not print ${pattern} within ${timeoutMs} ms; it printed: ${seen}`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (pattern.test(seen)) finish();
    };
    const onExit = (code: number | null): void => finish(new Error(`server exited with ${code} before listening: ${seen}`));
    const finish = (error?: Error): void => {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve();
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}
