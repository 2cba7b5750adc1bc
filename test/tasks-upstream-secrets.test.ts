// A library user's set-up, nothing listed as a secret: an upstream's credential is in its `headers` only, and
// the upstream echoes it in an error (as many do: "invalid token …"). The pool knows its upstreams' secrets,
// and the task service, the task manager and the runner thread keep them out of a task's status, log and error.
import { randomBytes } from 'node:crypto';
import { createSessionPool, createTaskManager, createTaskService, runAgent, type SessionPool, type TaskRecord } from '@klym/core';
import { createThreadRunner } from '@klym/core/engine';
import { createScriptedModel } from '@klym/core/internal';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlmServer } from './support/fake-llm-server.ts';
import { startHttpUpstream } from './support/http-upstream.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const TOKEN = `tok_${randomBytes(16).toString('hex')}`;
const ECHO = /invalid token [\w[\]]+/;

/** A server whose one tool refuses every call, quoting the request's credential back (the scheme word dropped). */
function echoingServer(): McpServer {
  const server = new McpServer({ name: 'echoing', version: '1.0.0' });
  server.registerTool('lookup', { description: 'Looks something up', annotations: { readOnlyHint: true } }, (extra) => {
    const authorization = String(extra.requestInfo?.headers.authorization ?? 'none');
    return { isError: true, content: [{ type: 'text' as const, text: `invalid token ${authorization.replace(/^Bearer\s+/i, '')}` }] };
  });
  return server;
}

/** The echoing server over loopback Streamable HTTP, and the upstreams that reach it with `Authorization: Bearer TOKEN`. */
async function echoingUpstream() {
  const upstream = await startHttpUpstream(echoingServer);
  cleanups.push(() => upstream.close());
  return { echoing: { url: upstream.mcpUrl, transport: 'streamable-http' as const, headers: { Authorization: `Bearer ${TOKEN}` } } };
}

async function poolOver(upstreams: Awaited<ReturnType<typeof echoingUpstream>>): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams });
  cleanups.push(() => pool.close({ drainTimeoutMs: 100 }));
  return pool;
}

/** What the model was last told, as text: the tool's answer is in it. */
const lastToolAnswer = (prompt: unknown): string => JSON.stringify(prompt).match(ECHO)?.[0] ?? 'no answer seen';

/** A model that calls the tool, then repeats its answer; asked to `fail`, it fails quoting it (a provider's error may quote the conversation). */
const scripted = (fail: boolean) =>
  createScriptedModel({
    steps: ({ call, options }) => {
      if (call === 1) return { toolCalls: [{ toolName: 'echoing__lookup', args: {} }] };
      if (fail) throw new Error(`the model gave up: ${lastToolAnswer(options.prompt)}`);
      return { text: `The upstream said: ${lastToolAnswer(options.prompt)}` };
    },
  });

describe("an upstream's credential, configured in its headers only, never shows", { timeout: 40_000 }, () => {
  it("in a task service's status, log or error, though the upstream echoes it and the model repeats it", async () => {
    const pool = await poolOver(await echoingUpstream());
    const service = createTaskService({
      pool,
      models: ['scripted'],
      shutdownGraceMs: 0,
      run: (options) => runAgent({ ...options, model: scripted(options.prompt === 'fail'), maxRetries: 0 }),
    });
    cleanups.push(() => service.close());

    const done = await service.start({ prompt: 'look it up' }, me.principal);
    const failed = await service.start({ prompt: 'fail' }, me.principal);
    const ended = async (id: string): Promise<TaskRecord> => {
      await expect.poll(async () => (await service.tasks.get(id, me)).status, { timeout: 20_000 }).toMatch(/completed|error|cancelled/);
      return service.tasks.get(id, me);
    };

    const [doneTask, failedTask] = await Promise.all([ended(done.task_id), ended(failed.task_id)]);
    expect(doneTask).toMatchObject({ status: 'completed', result: { text: 'The upstream said: invalid token [redacted]' } });
    expect(failedTask).toMatchObject({ status: 'error', error: { message: expect.stringContaining('invalid token [redacted]') } });
    for (const id of [done.task_id, failed.task_id]) {
      const log = JSON.stringify((await service.tasks.logs(id, me, { limit: 500 })).entries);
      // The tool's refusal is in the log, its credential scrubbed.
      expect(log).toContain('invalid token [redacted]');
      expect(log).not.toContain(TOKEN);
      expect(JSON.stringify(await service.tasks.get(id, me))).not.toContain(TOKEN);
      expect(JSON.stringify(await service.status({ task_id: id, full_result: true, max_log_entries: 500 }, me.principal))).not.toContain(TOKEN);
    }
  });

  it('in a task manager’s task run on the runner thread, its log, status or error', async () => {
    const upstreams = await echoingUpstream();
    const pool = await poolOver(upstreams);
    const runner = createThreadRunner({ upstreams, drainTimeoutMs: 100 });
    cleanups.push(() => runner.close());
    // The provider then refuses, quoting the conversation (the tool's answer) back.
    const llm = await startFakeLlmServer([
      { kind: 'turn', toolCalls: [{ name: 'echoing__lookup', args: {} }] },
      { kind: 'fail', status: 400, body: JSON.stringify({ error: { message: `Bad request near "invalid token ${TOKEN}"`, type: 'invalid_request_error' } }) },
    ]);
    cleanups.push(() => llm.close());
    const tasks = createTaskManager({
      pool,
      run: runner,
      defaults: {
        model: 'openai:gpt-4.1-mini',
        maxRetries: 0,
        providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0123456789', baseURL: llm.openaiBaseUrl } },
      },
    });
    cleanups.push(() => tasks.close({ graceMs: 0 }));

    const task = await tasks.start({ prompt: 'look it up' }, me);
    await expect.poll(async () => (await tasks.get(task.id, me)).status, { timeout: 30_000 }).toMatch(/completed|error|cancelled/);

    const record = await tasks.get(task.id, me);
    expect(record).toMatchObject({ status: 'error', error: { message: expect.stringContaining('invalid token [redacted]') } });
    const log = JSON.stringify((await tasks.logs(task.id, me, { limit: 500 })).entries);
    expect(log).toContain('invalid token [redacted]');
    expect(log).not.toContain(TOKEN);
    expect(JSON.stringify(record)).not.toContain(TOKEN);
  });
});
