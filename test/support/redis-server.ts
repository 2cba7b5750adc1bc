import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './upstream-servers.ts';

/** A `redis-server` (Debian's package) that a test started on a loopback port, in a temp dir of its own. */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>/0` */
  readonly url: string;
  readonly port: number;
  /** Where its append-only file lives; kept across `restart`. */
  readonly dir: string;
  readonly child: () => ChildProcess;
  /** Stops it (SIGKILL when `hard`, else SIGTERM, which writes what it has) and waits for the exit. */
  stop(options?: { readonly hard?: boolean }): Promise<void>;
  /** Starts it again on the same port and directory (its append-only file is read back). */
  restart(): Promise<void>;
  /** Stops it and deletes its directory. */
  close(): Promise<void>;
}

/** Settings the server starts with, beside the port and directory; Klym's recommended ones by default. */
export interface RedisServerOptions {
  /** @default 'yes' */
  readonly appendonly?: 'yes' | 'no';
  /** @default 'noeviction' */
  readonly maxmemoryPolicy?: string;
  /** Extra `--name value` arguments. */
  readonly args?: readonly string[];
}

/**
 * Starts `redis-server` on a free loopback port with a temp directory and `--appendonly yes`, and waits
 * until it accepts connections. `.ci/run` (through `scripts/run.sh`) installs the package when missing.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'klym-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendonly ?? 'yes',
    '--appendfsync',
    'everysec',
    '--maxmemory-policy',
    options.maxmemoryPolicy ?? 'noeviction',
    '--protected-mode',
    'no',
    '--daemonize',
    'no',
    '--loglevel',
    'notice',
    ...(options.args ?? []),
  ];
  let child = await launch(args);
  const stop = async ({ hard = false } = {}): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill(hard ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    dir,
    child: () => child,
    stop,
    async restart() {
      await stop();
      child = await launch(args);
    },
    async close() {
      await stop({ hard: true });
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function launch(args: readonly string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`redis-server did not get ready within 10 s:\n${seen.slice(-2_000)}`)), 10_000);
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (/Ready to accept connections/.test(seen)) done();
    };
    const onExit = (code: number | null): void => fail(new Error(`redis-server exited with code ${code} before it got ready:\n${seen.slice(-2_000)}`));
    const onError = (error: Error): void =>
      fail(new Error(`redis-server could not start (is Debian's redis-server package installed? scripts/run.sh installs it): ${error.message}`));
    function cleanup(): void {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
    }
    function done(): void {
      cleanup();
      child.stdout?.resume();
      child.stderr?.resume();
      resolve();
    }
    function fail(error: Error): void {
      cleanup();
      child.kill('SIGKILL');
      reject(error);
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
  return child;
}

/** One command in Redis's own protocol, over a socket of its own; resolves the first line of the reply (`:1`, `+OK`, …). */
export function redisCommand(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) {
        socket.end();
        resolve(reply.split('\r\n')[0] ?? '');
      }
    });
    socket.on('error', reject);
    socket.write(`*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`);
  });
}
