// There is no Docker engine on our machines: this checks what can be checked. docker-compose.yml parses
// and wires Klym to grynya-mcp-server as the issue asks, and the two images' commands (their Dockerfiles'
// CMD, with compose's environment) really run here: the fake grynya, and `klym serve` with
// deploy/klym.docker.yaml reaching it over legacy SSE with its Host override, behind a bearer token.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { temporaryDirectory } from './cli-harness.ts';
import { startRedisServer } from './support/redis-server.ts';
import { freePort } from './support/upstream-servers.ts';

const root = path.resolve(import.meta.dirname, '..');
// Klym's working directory in these runs: it writes its task store there (.klym/), which must not be the repository.
const workdir = temporaryDirectory();
afterAll(() => workdir[Symbol.dispose]());
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }
});

interface Service {
  build: { context: string; dockerfile: string };
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: string[];
  volumes?: string[];
}

/** The JSON-array CMD of a Dockerfile, and its ENV lines. */
function image(dockerfile: string): { cmd: string[]; env: Record<string, string> } {
  const text = readFileSync(path.join(root, dockerfile), 'utf8');
  const cmd = JSON.parse((text.match(/^CMD (\[.*\])$/m) as RegExpMatchArray)[1] as string) as string[];
  const env = Object.fromEntries([...text.matchAll(/^ENV (\w+)=(\S+)$/gm)].map((match) => [match[1], match[2]]));
  return { cmd, env };
}

/** Replaces `--flag value` in a command line. */
function withFlag(cmd: string[], flag: string, value: string): string[] {
  const at = cmd.indexOf(flag);
  return at === -1 ? [...cmd, flag, value] : cmd.with(at + 1, value);
}

/**
 * Runs an image's command as its WORKDIR (the repository root) would, but in `cwd` when given: paths the
 * command and `KLYM_CONFIG` name are taken against the root, and what Klym writes under its working
 * directory (`.klym/`) lands in `cwd`, never in the repository.
 */
function run(cmd: string[], env: Record<string, string>, cwd = root): { child: ChildProcess; output: () => string } {
  expect(cmd[0]).toBe('node');
  const fromRoot = (arg: string): string => (cwd !== root && /^[\w.-]+\/.*\.\w+$/.test(arg) && existsSync(path.join(root, arg)) ? path.join(root, arg) : arg);
  const environment = { PATH: process.env.PATH ?? '', ...env, ...(env.KLYM_CONFIG === undefined ? {} : { KLYM_CONFIG: fromRoot(env.KLYM_CONFIG) }) };
  const child = spawn(process.execPath, cmd.slice(1).map(fromRoot), { cwd, env: environment, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8')) as { services: Record<string, Service> };

  it('puts klym and grynya-mcp-server on one network, klym behind a token, published on loopback only', () => {
    expect(Object.keys(compose.services).toSorted()).toEqual(['grynya-mcp-server', 'klym']);
    const klym = compose.services.klym as Service;
    expect(klym.depends_on).toEqual(['grynya-mcp-server']);
    expect(klym.ports).toEqual(['127.0.0.1:8765:8765']);
    expect(klym.environment?.KLYM_SERVER_TOKENS).toMatch(/\$\{KLYM_TOKEN:\?/);
    const config = parse(readFileSync(path.join(root, klym.environment?.KLYM_CONFIG ?? 'missing'), 'utf8')) as {
      upstreams: { grynya: { url: string; transport: string; headers: Record<string, string> } };
      server: { host: string; allowedHosts: string[] };
    };
    expect(config.upstreams.grynya).toEqual({ url: 'http://grynya-mcp-server:8000/sse', transport: 'sse', headers: { Host: 'localhost' } });
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.server.allowedHosts).toContain('klym');
    expect(image((compose.services['grynya-mcp-server'] as Service).build.dockerfile).cmd).toEqual(
      expect.arrayContaining(['packages/fake-grynya/src/cli.ts', '--host', '0.0.0.0', '--port', '8000', '--allowed-hosts', 'localhost']),
    );
  });

  it("runs both images' commands: klym serve reaches the fake grynya over SSE with the Host override, and wants the token", async () => {
    const grynyaImage = image((compose.services['grynya-mcp-server'] as Service).build.dockerfile);
    const grynyaPort = await freePort();
    const grynya = run(withFlag(grynyaImage.cmd, '--port', String(grynyaPort)), grynyaImage.env);
    await vi.waitFor(() => expect(grynya.output()).toContain('/sse'), { timeout: 15_000, interval: 50 });

    const klymService = compose.services.klym as Service;
    const klymImage = image(klymService.build.dockerfile);
    const port = await freePort();
    const token = 'compose-test-token-0123456789';
    const env: Record<string, string> = {
      ...klymImage.env,
      ...Object.fromEntries(Object.entries(klymService.environment ?? {}).filter(([, value]) => !value.includes('${'))),
      KLYM_SERVER_TOKENS: JSON.stringify({ grynya: token }),
      KLYM_SERVER_PORT: String(port),
      // Inside compose the name grynya-mcp-server resolves; here the fake listens on loopback.
      KLYM_UPSTREAMS: JSON.stringify({ grynya: { url: `http://127.0.0.1:${grynyaPort}/sse` } }),
    };
    run(klymImage.cmd, env, workdir.path);
    const health = await vi.waitFor(
      async () => {
        const response = await fetch(`http://127.0.0.1:${port}/healthz`);
        expect(response.status).toBe(200);
        const answer = (await response.json()) as { upstreams: Record<string, { state: string; transport: string }> };
        // Klym listens before its pool has connected: `connecting` first.
        expect(answer.upstreams.grynya?.state).not.toBe('connecting');
        return answer;
      },
      { timeout: 15_000, interval: 50 },
    );
    // Ready over SSE: the Host override passed the fake's allow-list (it answers 421 otherwise).
    expect(health.upstreams.grynya).toMatchObject({ state: 'ready', transport: 'sse' });

    const refused = await fetch(`http://127.0.0.1:${port}/api/tasks`);
    expect(refused.status).toBe(401);
    const listed = await fetch(`http://127.0.0.1:${port}/api/tasks`, { headers: { authorization: `Bearer ${token}` } });
    expect(listed.status).toBe(200);
    expect(await listed.text()).not.toContain(token);
    // Tasks are kept under the working directory, which compose mounts as a volume (/klym/.klym).
    expect(existsSync(path.join(workdir.path, '.klym', 'tasks.db'))).toBe(true);
    expect(compose.services.klym).toMatchObject({ volumes: [expect.stringMatching(/:\/klym\/\.klym$/)] });
  });
});

describe('docker-compose.scale.yml', () => {
  const compose = parse(readFileSync(path.join(root, 'docker-compose.scale.yml'), 'utf8')) as {
    services: Record<string, Service & { image?: string; command?: string[]; deploy?: { replicas: number } }>;
  };

  it('adds Redis (append-only, no eviction), one front that runs no task, and two workers, on the same images', () => {
    expect(Object.keys(compose.services).toSorted()).toEqual(['grynya-mcp-server', 'klym-front', 'klym-worker', 'redis']);
    const {
      redis,
      'klym-front': front,
      'klym-worker': worker,
    } = compose.services as Record<string, Service & { image?: string; command?: string[]; deploy?: { replicas: number } }>;
    expect(redis?.command).toEqual(['redis-server', '--appendonly', 'yes', '--maxmemory-policy', 'noeviction']);
    expect(front?.environment).toMatchObject({ KLYM_CONFIG: 'deploy/klym.scale.yaml', KLYM_TASKS_CONCURRENCY: '0' });
    expect(front?.ports).toEqual(['127.0.0.1:8765:8765']);
    expect(worker?.command?.at(-1)).toBe('worker');
    expect(worker?.deploy?.replicas).toBe(2);
    expect(worker?.build).toEqual(front?.build);
    const config = parse(readFileSync(path.join(root, 'deploy/klym.scale.yaml'), 'utf8')) as { tasks: { store: string } };
    expect(config.tasks.store).toBe('redis://redis:6379/0');
  });

  it("runs the services' commands: a task started on the front runs on a worker, and the workers answer /healthz", async () => {
    const redisArgs = (compose.services.redis?.command ?? []).slice(1);
    const redis = await startRedisServer({ args: redisArgs });
    try {
      const grynyaImage = image((compose.services['grynya-mcp-server'] as Service).build.dockerfile);
      const grynyaPort = await freePort();
      const grynya = run(withFlag(grynyaImage.cmd, '--port', String(grynyaPort)), grynyaImage.env);
      await vi.waitFor(() => expect(grynya.output()).toContain('/sse'), { timeout: 15_000, interval: 50 });
      const front = compose.services['klym-front'] as Service;
      const worker = compose.services['klym-worker'] as Service & { command: string[] };
      const klymImage = image(front.build.dockerfile);
      const token = 'compose-test-token-0123456789';
      // Inside compose the names redis and grynya-mcp-server resolve; here both listen on loopback.
      const local = { KLYM_TASKS_STORE: redis.url, KLYM_UPSTREAMS: JSON.stringify({ grynya: { url: `http://127.0.0.1:${grynyaPort}/sse` } }) };
      const fixed = (service: Service): Record<string, string> =>
        Object.fromEntries(Object.entries(service.environment ?? {}).filter(([, value]) => !value.includes('${')));
      const frontPort = await freePort();
      const frontRun = run(
        klymImage.cmd,
        { ...klymImage.env, ...fixed(front), ...local, KLYM_SERVER_TOKENS: JSON.stringify({ grynya: token }), KLYM_SERVER_PORT: String(frontPort) },
        workdir.path,
      );
      const workerPorts = [await freePort(), await freePort()];
      for (const port of workerPorts) run(worker.command, { ...klymImage.env, ...fixed(worker), ...local, KLYM_WORKER_PORT: String(port) }, workdir.path);
      for (const port of workerPorts) {
        await vi.waitFor(async () => expect(await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()).toMatchObject({ role: 'worker' }), {
          timeout: 15_000,
          interval: 100,
        });
      }
      const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const started = await vi.waitFor(
        async () => {
          const response = await fetch(`http://127.0.0.1:${frontPort}/api/tasks`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ prompt: 'check the graph' }),
          });
          expect(response.status).toBe(202);
          return (await response.json()) as { task_id: string };
        },
        { timeout: 15_000, interval: 100 },
      );
      const done = await vi.waitFor(
        async () => {
          const task = (await (await fetch(`http://127.0.0.1:${frontPort}/api/tasks/${started.task_id}`, { headers: auth })).json()) as {
            status: string;
            result?: string;
          };
          expect(task.status).toBe('completed');
          return task;
        },
        { timeout: 15_000, interval: 100 },
      );
      // The self-check reached grynya from a worker: the front itself runs no task.
      expect(done.result).toMatch(/grynya/);
      expect(frontRun.output()).toContain('a front only');
      expect(frontRun.output()).not.toMatch(/appendonly|maxmemory-policy/);
    } finally {
      await redis.close();
    }
  });
});
