// Klym scaled out as real processes: `klym serve` fronts (tasks.concurrency 0) and `klym worker`s on one
// redis-server, over the fake grynya and the local fake OpenAI endpoint, each a child of the test.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { restCall, startKlym, temporaryDirectory, type KlymProcess } from '../cli-harness.ts';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply, type FakeRequest } from './fake-llm-server.ts';
import type { RedisServer } from './redis-server.ts';

/** The bearer token of the principal every test acts as. */
export const OWNER = 'token-of-grynya-0123456789';

/** What the fake model answered the interrupted call's task once it saw that the call's outcome is unknown. */
export const INTERRUPTED_ANSWER = 'The query was interrupted; I did not run it again.';

/** A `klym serve` front: its process and its REST API. */
export interface Front {
  readonly klym: KlymProcess;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** One REST call as the owner: GET without a body, POST with one. */
  api(route: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }>;
}

/** A fleet of Klym processes on one Redis database, and the fakes they use. */
export interface ScaleOut {
  readonly grynya: FakeGrynya;
  readonly llm: FakeLlmServer;
  /** Model requests per task tag (`tool-1`, …) of the prompt: see {@link modelReply}. */
  readonly llmCalls: Map<string, number>;
  /** Lets the model requests of `slow` tasks answer, those waiting and those to come. */
  releaseSlow(): void;
  /** `tasks.store`: the Redis URL, its database chosen by the test. */
  readonly storeUrl: string;
  /** Starts `klym serve --set tasks.concurrency=0` with `flags` and waits until it serves. */
  front(flags?: readonly string[]): Promise<Front>;
  /** Starts `klym worker` with `flags` and waits until it runs. */
  worker(flags?: readonly string[]): Promise<KlymProcess>;
  /** Every process started, in order, with what it printed so far. */
  readonly processes: readonly KlymProcess[];
  /** SIGKILLs what still runs and closes the fakes; the Redis server is the caller's. */
  close(): Promise<void>;
}

/** Options of {@link startScaleOut}. */
export interface ScaleOutOptions {
  readonly redis: RedisServer;
  /** The Redis URL the processes use. @default redis.url with `db` */
  readonly url?: string;
  /** The Redis database, one per test so that no test sees another's tasks or jobs. @default 0 */
  readonly db?: number;
  /** Settings of `tasks` beside the store. @default short locks: lockDurationMs 1500, stalledIntervalMs 1000 */
  readonly tasks?: Record<string, unknown>;
  /** More upstreams, beside the fake grynya. @default none */
  readonly upstreams?: Record<string, unknown>;
  /** What the fake model answers. @default {@link modelReply} */
  readonly replies?: (request: FakeRequest) => FakeReply;
}

/**
 * The fake model. A prompt names its task with a tag, `<kind>-<n>`, and the kind decides:
 * - `quick`: one turn, "Done: <tag>.";
 * - `tool`: calls `grynya__query_graph`, then answers {@link INTERRUPTED_ANSWER} when the conversation says the
 *   call's outcome is unknown, else "The graph answered.";
 * - `think`: the first request hangs (until it is cancelled), later ones answer "Thought it over.";
 * - `slow`: "Done: <tag>." once `released` has settled, however long that takes.
 */
export function modelReply(llmCalls: Map<string, number>, released: Promise<void>): (request: { body: string }) => FakeReply {
  return ({ body }) => {
    const [tag = 'unknown', kind] = /\b(quick|tool|think|slow)-\d+\b/.exec(body) ?? [];
    const call = (llmCalls.get(tag) ?? 0) + 1;
    llmCalls.set(tag, call);
    switch (kind) {
      case 'tool':
        if (body.includes('outcome is unknown')) return { kind: 'turn', text: INTERRUPTED_ANSWER };
        return call === 1
          ? { kind: 'turn', toolCalls: [{ name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }] }
          : { kind: 'turn', text: 'The graph answered.' };
      case 'think':
        return call === 1 ? { kind: 'hang' } : { kind: 'turn', text: 'Thought it over.' };
      case 'slow':
        return { kind: 'later', reply: released.then(() => ({ kind: 'turn', text: `Done: ${tag}.` })) };
      default:
        return { kind: 'turn', text: `Done: ${tag}.` };
    }
  };
}

/** Starts the fakes and writes the configuration every process of the fleet reads; processes start on demand. */
export async function startScaleOut(options: ScaleOutOptions): Promise<ScaleOut> {
  const directory = temporaryDirectory();
  const grynya = await createFakeGrynya();
  const llmCalls = new Map<string, number>();
  const slow = Promise.withResolvers<void>();
  const llm = await startFakeLlmServer(options.replies ?? modelReply(llmCalls, slow.promise));
  const storeUrl = (options.url ?? options.redis.url).replace(/\/\d+$/, `/${options.db ?? 0}`);
  const config = {
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' }, ...options.upstreams },
    llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
    tasks: { store: storeUrl, concurrency: 2, lockDurationMs: 1_500, stalledIntervalMs: 1_000, ...options.tasks },
    server: { port: 0, tokens: { grynya: OWNER } },
    worker: { port: 0 },
  };
  writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));
  const processes: KlymProcess[] = [];
  const spawnKlym = (args: readonly string[]): KlymProcess => {
    const klym = startKlym([...args, '--config', 'klym.config.json'], { cwd: directory.path });
    processes.push(klym);
    return klym;
  };
  return {
    grynya,
    llm,
    llmCalls,
    releaseSlow: () => slow.resolve(),
    storeUrl,
    processes,
    async front(flags = []) {
      const klym = spawnKlym(['serve', '--set', 'tasks.concurrency=0', ...flags]);
      const [, url = ''] = await klym.waitFor(/serving MCP at (http:\/\/[^\s]+)\/mcp/);
      return { klym, url, api: (route, body) => restCall(url, route, OWNER, body) };
    },
    async worker(flags = []) {
      const klym = spawnKlym(['worker', ...flags]);
      await klym.waitFor(/Klym worker is running/);
      return klym;
    },
    async close() {
      await Promise.all(
        processes.map(async (klym) => {
          if (klym.child.exitCode !== null || klym.child.signalCode !== null) return;
          klym.child.kill('SIGKILL');
          await klym.exited();
        }),
      );
      await Promise.all([grynya.close(), llm.close()]);
      directory[Symbol.dispose]();
    },
  };
}

/** Starts a task over REST and answers its id; a refusal fails the test with the front's answer. */
export async function startTask(front: Front, prompt: string): Promise<string> {
  const { status, json } = await front.api('/api/tasks', { prompt });
  if (status !== 202) throw new Error(`Expected 202 for a start, got ${status}: ${JSON.stringify(json)}`);
  return String(json.task_id);
}

/** A task's status view (`full_result`), as a front serves it. */
export async function statusOf(front: Front, id: string): Promise<Record<string, unknown>> {
  const { status, json } = await front.api(`/api/tasks/${id}?full_result=true`);
  if (status !== 200) throw new Error(`Expected 200 for task ${id}'s status, got ${status}: ${JSON.stringify(json)}`);
  return json;
}

/** A log entry as the REST API gives it whole: its data's fields beside `seq`, `time` and `type`. */
export type LogEntry = { readonly seq: number; readonly type: string } & Readonly<Record<string, unknown>>;

/** A task's whole log, as a front serves it. */
export async function logOf(front: Front, id: string): Promise<LogEntry[]> {
  return (await front.api(`/api/tasks/${id}/logs?limit=500`)).json.entries as LogEntry[];
}

/** Whether a process still runs. */
export const alive = (klym: KlymProcess): boolean => klym.child.exitCode === null && klym.child.signalCode === null;
