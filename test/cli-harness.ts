// Spawns the real `klym` CLI the way `pnpm klym …` runs it: `node --conditions=klym-source apps/server/src/main.ts`.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';

/** The `klym` entry point. */
export const KLYM_MAIN = path.resolve(import.meta.dirname, '../apps/server/src/main.ts');

/** What a finished `klym` process left behind. */
export interface KlymExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A running `klym` process, with its output so far. */
export interface KlymProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when stdout or stderr (as chosen) has matched `pattern`; rejects after `timeoutMs`. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr', timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves when the process has exited; kills it and rejects after `timeoutMs`. */
  exited(timeoutMs?: number): Promise<KlymExit>;
}

/** A temporary working directory (so no `klym.config.*` of the repo is picked up), removed by `dispose`. */
export function temporaryDirectory(): { path: string } & Disposable {
  const directory = mkdtempSync(path.join(tmpdir(), 'klym-cli-test-'));
  return { path: directory, [Symbol.dispose]: () => rmSync(directory, { recursive: true, force: true }) };
}

/**
 * Starts `klym` with `args`, in `cwd`, with an environment of only `PATH`, `HOME` and `env`: no `KLYM_`
 * variable or provider key of the machine leaks in. `nodeArgs` go to node before the script (`--import`
 * of a test fixture, say).
 */
export function startKlym(args: readonly string[], options: { cwd: string; env?: Record<string, string>; nodeArgs?: readonly string[] }): KlymProcess {
  const child = spawn(process.execPath, ['--conditions=klym-source', ...(options.nodeArgs ?? []), KLYM_MAIN, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? options.cwd, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exit = new Promise<KlymExit>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    waitFor(pattern, stream = 'stdout', timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const source = stream === 'stdout' ? child.stdout : child.stderr;
        const check = (): void => {
          const match = (stream === 'stdout' ? stdout : stderr).match(pattern);
          if (match === null) return;
          cleanup();
          resolve(match);
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`klym did not print ${pattern} on ${stream} within ${timeoutMs} ms; stdout: ${stdout}\nstderr: ${stderr}`));
        }, timeoutMs);
        const onExit = (): void => {
          cleanup();
          reject(new Error(`klym exited before printing ${pattern} on ${stream}; stdout: ${stdout}\nstderr: ${stderr}`));
        };
        const cleanup = (): void => {
          clearTimeout(timer);
          source?.off('data', check);
          child.off('close', onExit);
        };
        source?.on('data', check);
        child.once('close', onExit);
        queueMicrotask(check);
      });
    },
    async exited(timeoutMs = 20_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`klym did not exit within ${timeoutMs} ms; stdout: ${stdout}\nstderr: ${stderr}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([exit, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Runs `klym` with `args` to the end. */
export function runKlym(args: readonly string[], options: { cwd: string; env?: Record<string, string> }): Promise<KlymExit> {
  return startKlym(args, options).exited();
}

/** A REST call to a Klym server as `token`'s principal: GET, or POST with `body` as JSON; its status, headers and JSON answer. */
export async function restCall(
  url: string,
  route: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const response = await fetch(`${url}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, headers: response.headers, json: (await response.json()) as Record<string, unknown> };
}

/**
 * Starts `klym serve --config klym.config.json` in `cwd` and waits until it serves; `cleanups` gets what
 * SIGKILLs it if the test has not ended it.
 */
export async function serveKlym(cwd: string, cleanups: (() => Promise<unknown>)[]): Promise<{ klym: KlymProcess; url: string }> {
  const klym = startKlym(['serve', '--config', 'klym.config.json'], { cwd });
  cleanups.push(async () => {
    if (klym.child.exitCode === null && klym.child.signalCode === null) {
      klym.child.kill('SIGKILL');
      await klym.exited();
    }
  });
  const [, url] = (await klym.waitFor(/serving MCP at (http:\/\/[^\s]+)\/mcp/)) as RegExpMatchArray;
  return { klym, url: url as string };
}

/** A task as `GET /api/tasks/:id` shows it, as far as the tests of turns and quotas read it. */
export interface SeenTask {
  readonly task_id: string;
  readonly status: string;
  readonly queue_position?: number;
  readonly started_at?: string;
  readonly finished_at?: string;
}

/** Starts a task over REST as `token`'s principal, expecting 202, and answers its id. */
export async function startTask(url: string, token: string, prompt: string): Promise<string> {
  const { status, json } = await restCall(url, '/api/tasks', token, { prompt });
  expect(status).toBe(202);
  return String(json.task_id);
}

/** The task `id` as its owner `token` sees it over REST. */
export const seenTask = async (url: string, token: string, id: string): Promise<SeenTask> =>
  (await restCall(url, `/api/tasks/${id}`, token)).json as unknown as SeenTask;

/** `GET /api/quota` as `token`'s principal. */
export const quotaOf = async (url: string, token: string): Promise<Record<string, unknown>> => (await restCall(url, '/api/quota', token)).json;

/** Cancels task `id` over REST, expecting it to have been cancelled then. */
export async function cancelTask(url: string, token: string, id: string): Promise<void> {
  expect((await restCall(url, `/api/tasks/${id}/cancel`, token, {})).json).toMatchObject({ cancelled: true });
}
