// Webhooks from a real `klym serve` on its SQLite store, to a real receiver that verifies every signature,
// with Klym killed with SIGKILL while a delivery is being retried and started again on the same file.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { startWebhookReceiver, webhookSecret } from './support/webhook-receiver.ts';

const OWNER = 'token-of-grynya-0123456789';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

type Delivery = { type: string; event: string; attempt: number; outcome: string; status?: number; webhookId: string };
const deliveries = async (url: string, id: string): Promise<Delivery[]> =>
  ((await restCall(url, `/api/tasks/${id}/logs?limit=500`, OWNER)).json.entries as Delivery[]).filter((entry) => entry.type === 'webhook-delivery');

describe('webhooks from klym serve, across a SIGKILL mid-retry', () => {
  it('delivers each event once per webhook-id, signed, after two failures and a restart on the same store', async () => {
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const secret = webhookSecret();
    // Fails each message's first two attempts; later ones fail too until `accepting`, which the test sets
    // once the first Klym is dead: so the delivery can only complete after the restart.
    let accepting = false;
    const receiver = await startWebhookReceiver({ secret, answer: (request) => ({ status: request.attempt <= 2 ? 500 : accepting ? 200 : 503 }) });
    cleanups.push(() => receiver.close());
    const config = {
      tasks: { store: 'sqlite:state/tasks.db' },
      server: { port: 0, tokens: { grynya: OWNER } },
      webhooks: {
        ops: { url: receiver.url, secret, events: ['task.started', 'task.completed'], retryDelayMs: 1_000, maxRetryDelayMs: 2_000, timeoutMs: 5_000 },
      },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));

    const first = await serveKlym(directory.path, cleanups);
    const started = await restCall(first.url, '/api/tasks', OWNER, { prompt: 'Check the graph', webhook: 'ops' });
    expect(started.status).toBe(202);
    const id = String(started.json.task_id);
    // Both events failed twice, and their next attempts are scheduled in the store.
    await vi.waitFor(
      async () => {
        const retrying = (await deliveries(first.url, id)).filter((entry) => entry.attempt === 2 && entry.outcome === 'retrying');
        expect(retrying.map((entry) => entry.event).toSorted()).toEqual(['task.completed', 'task.started']);
      },
      { timeout: 15_000, interval: 20 },
    );
    first.klym.child.kill('SIGKILL');
    expect((await first.klym.exited()).signal).toBe('SIGKILL');
    expect(receiver.accepted.size).toBe(0);
    accepting = true;

    const second = await serveKlym(directory.path, cleanups);
    await vi.waitFor(() => expect(receiver.accepted.size).toBe(2), { timeout: 15_000 });
    // Every request verified with the endpoint's secret; one id per event, the same before and after the restart.
    expect(receiver.requests.filter((request) => request.invalid !== undefined)).toEqual([]);
    const idsByType = new Map<string, Set<string>>();
    for (const request of receiver.requests)
      idsByType.set(request.payload?.type ?? '', (idsByType.get(request.payload?.type ?? '') ?? new Set()).add(request.id));
    expect([...idsByType.keys()].toSorted()).toEqual(['task.completed', 'task.started']);
    expect([...idsByType.values()].map((ids) => ids.size)).toEqual([1, 1]);
    expect(receiver.requests.filter((request) => request.attempt <= 2).length).toBe(4);
    const payloads = [...receiver.accepted.values()].toSorted((a, b) => a.type.localeCompare(b.type));
    expect(payloads).toEqual([
      {
        type: 'task.completed',
        timestamp: expect.any(String),
        data: expect.objectContaining({ task_id: id, status: 'completed', principal: 'grynya', finish_reason: 'stop' }),
      },
      { type: 'task.started', timestamp: expect.any(String), data: { task_id: id, status: 'running', principal: 'grynya' } },
    ]);

    // The task's log tells each attempt, across both lives: the two failures, then the delivery.
    await vi.waitFor(async () => expect((await deliveries(second.url, id)).filter((entry) => entry.outcome === 'delivered')).toHaveLength(2));
    const log = await deliveries(second.url, id);
    for (const event of ['task.started', 'task.completed']) {
      const ofEvent = log.filter((entry) => entry.event === event);
      expect(ofEvent.slice(0, 2)).toMatchObject([
        { attempt: 1, outcome: 'retrying', status: 500 },
        { attempt: 2, outcome: 'retrying', status: 500 },
      ]);
      expect(ofEvent.at(-1)).toMatchObject({ outcome: 'delivered', status: 200 });
    }
    expect((await restCall(second.url, `/api/tasks/${id}`, OWNER)).json.status).toBe('completed');

    second.klym.child.kill('SIGTERM');
    const exit = await second.klym.exited();
    expect(exit.code).toBe(0);
    const everything = [first.klym.stdout(), first.klym.stderr(), exit.stdout, exit.stderr, JSON.stringify(log)].join('\n');
    expect(everything).not.toContain(secret.slice('whsec_'.length));
  }, 60_000);
});
