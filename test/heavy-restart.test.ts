// Issue #27: a real `klym serve` SIGKILLed while its task maps an artifact, started again on the same
// SQLite file: the task resumes, finds the artifact its first life kept, and maps it to the exact answer.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { bigLog } from './support/big-log-server.ts';
import { startRedisServer } from './support/redis-server.ts';
import { startScaleOut, statusOf } from './support/scale-out.ts';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from './support/fake-llm-server.ts';

const TOKEN = 'token-of-grynya-0123456789';
const LINES = 40_000;
const NEEDLE_AT = 31_337;
const LOG = bigLog(LINES, NEEDLE_AT);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

const isMapCall = (request: FakeRequest): boolean => request.body.includes('You are given one chunk of a larger text');

/** The agent: reads the log, maps it for the ERROR lines per service, then sums; map calls hang while `hang.on`. */
function agent(hang: { on: boolean }): (request: FakeRequest) => FakeReply {
  return (request) => {
    if (isMapCall(request)) {
      if (hang.on) return { kind: 'hang' };
      const counts = new Map<string, number>();
      for (const match of request.body.matchAll(/\\n\d+: [^\\]* (svc-\d+) ERROR /g)) counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + 1);
      return { kind: 'turn', text: [...counts].map(([service, count]) => `${service}=${count}`).join(' ') || 'nothing' };
    }
    const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
    if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'big__read_log', args: { lines: LINES, needle_at: NEEDLE_AT } }] };
    if (!/answered on each of \d+ chunks/.test(request.body))
      return { kind: 'turn', toolCalls: [{ name: 'klym__map_artifact', args: { artifact, instruction: 'Count ERROR lines per service.' } }] };
    let total = 0;
    for (const match of request.body.matchAll(/svc-\d+=(\d+)/g)) total += Number(match[1]);
    return { kind: 'turn', text: `${total} ERROR lines in ${artifact}` };
  };
}

const bigUpstream = { big: { command: process.execPath, args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'big-log-server.ts')] } };
const errorLines = (): number => [...LOG.matchAll(/ svc-\d+ ERROR /g)].length;

describe('a task SIGKILLed mid-map', () => {
  it('resumes on the same SQLite store with the artifact its first life kept, and maps it to the exact answer', async () => {
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const hang = { on: true };
    const llm = await startFakeLlmServer(agent(hang));
    cleanups.push(() => llm.close());
    const config = {
      upstreams: bigUpstream,
      llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
      tasks: { store: 'sqlite:state/tasks.db' },
      server: { port: 0, tokens: { grynya: TOKEN } },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));

    const first = await serveKlym(directory.path, cleanups);
    const { json } = await restCall(first.url, '/api/tasks', TOKEN, { prompt: 'How many ERROR lines?' });
    const id = String(json.task_id);
    await vi.waitFor(() => expect(llm.requests.filter(isMapCall).length).toBeGreaterThan(0), { timeout: 60_000 });
    const before = (await restCall(first.url, `/api/tasks/${id}`, TOKEN)).json as { status: string; artifacts?: { id: string }[] };
    expect(before.status).toBe('running');
    const artifact = before.artifacts?.[0]?.id;
    expect(artifact).toMatch(/^art_/);
    first.klym.child.kill('SIGKILL');
    expect((await first.klym.exited()).signal).toBe('SIGKILL');

    hang.on = false;
    const second = await serveKlym(directory.path, cleanups);
    await vi.waitFor(async () => expect(((await restCall(second.url, `/api/tasks/${id}`, TOKEN)).json as { status: string }).status).toBe('completed'), {
      timeout: 30_000,
    });
    const after = (await restCall(second.url, `/api/tasks/${id}?full_result=true`, TOKEN)).json as {
      result: string;
      resumed_from?: number[];
      artifacts: { id: string; bytes: number }[];
    };
    expect(after.result).toBe(`${errorLines()} ERROR lines in ${artifact}`);
    expect(after.resumed_from?.length).toBe(1);
    // The log, kept once (the resumed run did not read it again), and the map's answers, kept as a table.
    expect(after.artifacts).toEqual([
      expect.objectContaining({ id: artifact, bytes: Buffer.byteLength(LOG) }),
      expect.objectContaining({ tool: 'klym__map_artifact', records: expect.objectContaining({ keys: ['from', 'to', 'label', 'answer'] }) }),
    ]);
    second.klym.child.kill('SIGTERM');
    expect((await second.klym.exited()).code).toBe(0);
  }, 90_000);
});

describe('a worker SIGKILLed mid-map, on Redis', () => {
  it('has its task taken over by another worker, which maps the artifact the first one kept', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const hang = { on: true };
    const fleet = await startScaleOut({ redis, db: 3, upstreams: bigUpstream, replies: agent(hang) });
    cleanups.push(() => fleet.close());
    const front = await fleet.front();
    const first = await fleet.worker();
    const { json } = await front.api('/api/tasks', { prompt: 'How many ERROR lines?' });
    const id = String(json.task_id);
    await vi.waitFor(() => expect(fleet.llm.requests.filter(isMapCall).length).toBeGreaterThan(0), { timeout: 60_000 });
    const artifact = ((await statusOf(front, id)) as { artifacts?: { id: string }[] }).artifacts?.[0]?.id;
    expect(artifact).toMatch(/^art_/);
    first.child.kill('SIGKILL');
    await first.exited();

    hang.on = false;
    await fleet.worker();
    await vi.waitFor(async () => expect((await statusOf(front, id)).status).toBe('completed'), { timeout: 30_000, interval: 200 });
    const after = (await statusOf(front, id)) as { result: string; artifacts: { id: string; bytes: number }[] };
    expect(after.result).toBe(`${errorLines()} ERROR lines in ${artifact}`);
    // The log, kept once (the resumed run did not read it again), and the map's answers, kept as a table.
    expect(after.artifacts).toEqual([
      expect.objectContaining({ id: artifact, bytes: Buffer.byteLength(LOG) }),
      expect.objectContaining({ tool: 'klym__map_artifact', records: expect.objectContaining({ keys: ['from', 'to', 'label', 'answer'] }) }),
    ]);
  }, 90_000);
});
