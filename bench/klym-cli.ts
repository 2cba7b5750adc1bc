// Klym as its users run it, for scenario 8: `klym serve` and `klym worker` processes started the way
// `pnpm klym …` starts them, each from a config file in a directory of its own; the benchmark talks to a
// front over REST, reads each process's CPU time from /proc, and plays the model on the fake OpenAI endpoint.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startKlym } from '../test/cli-harness.ts';
import type { FakeReply, FakeRequest } from '../test/support/fake-llm-server.ts';

/** A `klym serve` or `klym worker` process. */
export interface KlymCli {
  /** The front's base URL (REST at `/api/tasks`), or a worker's health endpoint's. */
  readonly url: string;
  readonly pid: number;
  /** Sends SIGKILL and waits for the exit: a worker that dies mid-task. */
  kill(): Promise<void>;
  /** SIGTERM, then the exit (with `tasks.shutdownGraceMs: 0`, at once), then its directory removed. */
  stop(): Promise<void>;
}

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User plus system CPU time of a process so far, in milliseconds, from /proc/<pid>/stat (every thread counted). */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
}

/**
 * Starts `klym <command> --config klym.config.json` with `config` in a temp directory (a SQLite store's
 * relative path lands there), quiet below warnings, and waits until it has printed where it serves.
 */
export async function startKlymCli(command: 'serve' | 'worker', config: Record<string, unknown>): Promise<KlymCli> {
  const directory = mkdtempSync(path.join(tmpdir(), `klym-bench-${command}-`));
  const quiet = { logging: { level: 'warning' }, ...config };
  writeFileSync(path.join(directory, 'klym.config.json'), JSON.stringify(command === 'worker' ? { ...quiet, worker: { port: 0 } } : quiet));
  const klym = startKlym([command, '--config', 'klym.config.json'], { cwd: directory });
  const ended = (): boolean => klym.child.exitCode !== null || klym.child.signalCode !== null;
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    if (!ended()) {
      klym.child.kill(signal);
      await klym.exited(30_000);
    }
  };
  try {
    // Several processes start at once on a shared machine: give them time.
    const pattern = command === 'serve' ? /REST: (http:\/\/\S+)\/api\/tasks/ : /health: (http:\/\/\S+)\/healthz/;
    const [, url] = await klym.waitFor(pattern, 'stdout', 60_000);
    return {
      url: url as string,
      pid: klym.child.pid as number,
      kill: () => end('SIGKILL'),
      async stop() {
        await end('SIGTERM');
        rmSync(directory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await end('SIGKILL');
    rmSync(directory, { recursive: true, force: true });
    throw error;
  }
}

async function rest<T>(url: string, init?: { body: unknown }): Promise<T> {
  const response = await fetch(
    url,
    init === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(init.body) },
  );
  const json = (await response.json()) as T;
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${JSON.stringify(json)}`);
  return json;
}

/** `POST /api/tasks` on a front; resolves with the task's id. */
export async function startTask(front: string, prompt: string): Promise<string> {
  return (await rest<{ task_id: string }>(`${front}/api/tasks`, { body: { prompt } })).task_id;
}

/** One task's status view (`created_at`, `started_at`, `finished_at`, `status`, …). */
export const taskOf = (front: string, id: string): Promise<{ status: string; created_at: string; started_at?: string; finished_at?: string }> =>
  rest(`${front}/api/tasks/${id}`);

/** A task's log entries, oldest first. */
export const logOf = async (front: string, id: string): Promise<{ time: string; type: string; data: Record<string, unknown> }[]> =>
  (await rest<{ entries: { time: string; type: string; data: Record<string, unknown> }[] }>(`${front}/api/tasks/${id}/logs?limit=500`)).entries;

/** Waits until no task is pending or running (as the front's `/healthz` counts them: every process's, on Redis). */
export async function waitUntilIdle(front: string): Promise<void> {
  for (;;) {
    const { tasks } = await rest<{ tasks: Record<string, number> }>(`${front}/healthz`);
    if ((tasks.pending ?? 0) + (tasks.running ?? 0) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The model's configuration for a fake OpenAI endpoint at `baseURL` (its key is a placeholder the fake ignores). */
export const fakeModel = (baseURL: string): Record<string, unknown> => ({
  model: 'openai:gpt-4.1-mini',
  providers: { openai: { apiKey: 'sk-bench-placeholder-0000', baseURL } },
  maxRetries: 0,
});

/**
 * The benchmark's model: every task asks for `toolSteps` grynya queries, one a step, then answers; each
 * answer takes `delayMs`. A resumed run told that its interrupted call's outcome is unknown answers at
 * once. `onAnswer` hears each task's final answer, by the prompt.
 */
export function scriptedSteps(options: { delayMs: number; toolSteps: number; onAnswer?: (prompt: string) => void }): (request: FakeRequest) => FakeReply {
  return ({ body, json }) => {
    const results = body.split('"function_call_output"').length - 1;
    const delay = options.delayMs > 0 ? { delayMs: options.delayMs } : {};
    if (results < options.toolSteps && !body.includes('outcome is unknown')) {
      return { kind: 'turn', toolCalls: [{ name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }], ...delay };
    }
    const prompt = /bench-task-[\w-]+/.exec(JSON.stringify((json as { input?: unknown } | undefined)?.input ?? ''))?.[0] ?? '';
    options.onAnswer?.(prompt);
    return { kind: 'turn', text: `Done after ${results} queries.`, ...delay };
  };
}
