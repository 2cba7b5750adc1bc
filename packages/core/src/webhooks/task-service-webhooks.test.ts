import { afterEach, describe, expect, it, vi } from 'vitest';
import { startWebhookReceiver, webhookSecret, type WebhookReceiver } from '../../../../test/support/webhook-receiver.ts';
import { runAgent } from '../agent/run-agent.ts';
import { createScriptedModel } from '../agent/scripted-model.ts';
import { createSessionPool } from '../pool/session-pool.ts';
import { runResult } from '../testing/run-result.ts';
import type { AgentRunner } from '../tasks/task-manager-types.ts';
import { parseArgs, startTaskSchema } from '../tasks/task-request.ts';
import { createTaskService, type TaskService, type TaskServiceOptions } from '../tasks/task-service.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const PROVIDER_KEY = 'sk-provider-key-of-klym-0123456789';

/** A run that answers at once, quoting a provider key (which must never reach a receiver or a log). */
const answers: AgentRunner = async () => runResult(`All done; the key was ${PROVIDER_KEY}.`);

/** A run that lasts until it is cancelled. */
const hangs: AgentRunner = (options) =>
  new Promise((_, reject) => options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true }));

/** A run whose model asks its caller which day, then answers. */
const asker: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      // Asks until the conversation holds the ask's answer (each run's model counts its calls from 1).
      steps: ({ options: call }) =>
        call.prompt.some((message) => message.role === 'tool')
          ? { text: 'Done for that day.' }
          : { toolCalls: [{ toolName: 'klym__ask_caller', args: { question: 'Which day?' } }] },
    }),
  });

async function service(options: Partial<TaskServiceOptions>): Promise<TaskService> {
  const pool = await createSessionPool({ upstreams: {} });
  cleanups.push(() => pool.close());
  const created = createTaskService({ pool, shutdownGraceMs: 0, run: answers, providers: { openai: { apiKey: PROVIDER_KEY } }, ...options });
  cleanups.push(() => created.close());
  return created;
}

async function receiver(): Promise<WebhookReceiver & { secret: string }> {
  const secret = webhookSecret();
  const started = await startWebhookReceiver({ secret });
  cleanups.push(() => started.close());
  return Object.assign(started, { secret });
}

describe('createTaskService with webhooks', () => {
  it('refuses a start that names an endpoint not configured, naming it and those that are', async () => {
    const ops = await receiver();
    const klym = await service({ webhooks: { ops: { url: ops.url, secret: ops.secret }, audit: { url: ops.url, secret: ops.secret } } });
    await expect(klym.start({ prompt: 'p', webhook: 'opz' }, 'grynya')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: '`webhook`: "opz" is not a webhook endpoint here; choose one of: ops, audit',
    });
    const bare = await service({});
    await expect(bare.start({ prompt: 'p', webhook: 'ops' }, 'grynya')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('none is configured here'),
    });
    expect((await klym.tasks.list({ principal: 'grynya' })).total).toBe(0);
  });

  it('never takes a URL from a caller: there is no such argument', async () => {
    const ops = await receiver();
    const klym = await service({ webhooks: { ops: { url: ops.url, secret: ops.secret } } });
    for (const args of [
      { prompt: 'p', webhook_url: 'http://169.254.169.254/latest/meta-data' },
      { prompt: 'p', webhook: { url: 'http://169.254.169.254/' } },
    ]) {
      expect(() => parseArgs(startTaskSchema, args)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`webhook(_url)?`/) }),
      );
    }
    await expect(klym.start({ prompt: 'p', webhook: 'http://169.254.169.254/' }, 'grynya')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(ops.requests).toEqual([]);
  });

  it("tells the endpoint a start named of the task's start and end, and shows each attempt in the task's log, with no secret anywhere", async () => {
    const ops = await receiver();
    const klym = await service({ webhooks: { ops: { url: ops.url, secret: ops.secret, events: ['task.started', 'task.completed'] } } });
    const { task_id } = await klym.start({ prompt: 'p', webhook: 'ops' }, 'grynya');
    await vi.waitFor(() => expect(ops.accepted.size).toBe(2), { timeout: 5_000 });
    expect(ops.requests.every((request) => request.invalid === undefined)).toBe(true);
    expect([...ops.accepted.values()]).toEqual([
      { type: 'task.started', timestamp: expect.any(String), data: { task_id, status: 'running', principal: 'grynya' } },
      {
        type: 'task.completed',
        timestamp: expect.any(String),
        data: { task_id, status: 'completed', principal: 'grynya', finish_reason: 'stop', result_preview: 'All done; the key was [redacted].' },
      },
    ]);
    await vi.waitFor(async () => expect((await klym.logs({ task_id }, 'grynya')).entries.filter((entry) => entry.type === 'webhook-delivery')).toHaveLength(2));
    const log = await klym.logs({ task_id }, 'grynya');
    expect(log.entries.filter((entry) => entry.type === 'webhook-delivery')).toEqual([
      expect.objectContaining({ endpoint: 'ops', attempt: 1, outcome: 'delivered', status: 204 }),
      expect.objectContaining({ endpoint: 'ops', attempt: 1, outcome: 'delivered', status: 204 }),
    ]);
    // A glance names the outcome within its one line per entry.
    const glance = await klym.status({ task_id }, 'grynya');
    expect(glance.log?.entries.at(-1)).toMatchObject({ type: 'webhook-delivery', text: expect.stringContaining('"outcome":"delivered"') });
    const seen = JSON.stringify([
      log,
      await klym.status({ task_id, full_result: true }, 'grynya'),
      await klym.capabilities(),
      ops.requests.map((request) => request.body),
    ]);
    for (const secret of [ops.secret, ops.secret.slice('whsec_'.length), PROVIDER_KEY]) expect(seen).not.toContain(secret);
  });

  it('tells an endpoint by default that a task asks its caller, with the question, and then of its end', async () => {
    const ops = await receiver();
    const klym = await service({ run: asker, webhooks: { ops: { url: ops.url, secret: ops.secret } } });
    const { task_id } = await klym.start({ prompt: 'p', webhook: 'ops' }, 'grynya');
    await vi.waitFor(() => expect(ops.accepted.size).toBe(1), { timeout: 5_000 });
    expect([...ops.accepted.values()][0]).toEqual({
      type: 'task.input_required',
      timestamp: expect.any(String),
      data: { task_id, status: 'input_required', principal: 'grynya', question: 'Which day?' },
    });
    await klym.reply({ task_id, answer: 'yesterday' }, 'grynya');
    await vi.waitFor(() => expect(ops.accepted.size).toBe(2), { timeout: 5_000 });
    expect([...ops.accepted.values()][1]).toMatchObject({ type: 'task.completed', data: { task_id, status: 'completed' } });
  });

  it('tells an `all` endpoint of a cancel, and of tasks that named no endpoint', async () => {
    const audit = await receiver();
    const klym = await service({ run: hangs, webhooks: { audit: { url: audit.url, secret: audit.secret, all: true } } });
    const { task_id } = await klym.start({ prompt: 'p' }, 'grynya');
    await vi.waitFor(async () => expect((await klym.status({ task_id }, 'grynya')).status).toBe('running'));
    await klym.cancel({ task_id }, 'grynya');
    await vi.waitFor(() => expect(audit.accepted.size).toBe(1), { timeout: 5_000 });
    expect([...audit.accepted.values()]).toEqual([
      {
        type: 'task.cancelled',
        timestamp: expect.any(String),
        data: { task_id, status: 'cancelled', principal: 'grynya', cancel_reason: 'cancelled by caller' },
      },
    ]);
  });
});
