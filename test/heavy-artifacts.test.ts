// Issue #27, big results become artifacts: a task reads a log far bigger than what its model should be
// sent, through @modelcontextprotocol/server-filesystem over stdio (and, for Grynya's view, a stdio server of
// ours that answers the same way), with the real OpenAI provider against a local fake of its API, on the
// SQLite store, inline and on the runner thread. The model is never sent the log; it finds the needle with
// klym__grep_artifact and reads around it with klym__read_artifact, and the artifact stays in the task's store.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, createTaskManager, runAgent, type AgentRunner, type TaskManager, type TaskRecord, type TaskStore } from '@klym/core';
import { createThreadRunner } from '@klym/core/engine';
import { createScriptedModel } from '@klym/core/internal';
import { createSqliteTaskStore } from '@klym/core/sqlite';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startKlymServer } from '../apps/server/src/server/index.ts';
import { temporaryDirectory } from './cli-harness.ts';
import { bigLog } from './support/big-log-server.ts';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from './support/fake-llm-server.ts';
import { payload, waitForEnd } from './support/server-harness.ts';
import { packageFile } from './support/upstream-servers.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const me = { principal: 'grynya' };
const KEY = 'sk-test-key-for-the-fake-0123456789';
const LINES = 60_000;
/** The model's window, as Klym is configured with it and as the fake enforces it (counted by o200k_base). */
const WINDOW = 64_000;
const NEEDLE_AT = 31_337;
const LOG = bigLog(LINES, NEEDLE_AT);
const upstreams = { big: { command: process.execPath, args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'big-log-server.ts')] } };
// server-filesystem over a directory holding the log: it answers a file with its text and again as structuredContent.
const DIRECTORY = mkdtempSync(path.join(tmpdir(), 'klym-heavy-artifacts-'));
const FILE = path.join(DIRECTORY, 'night.log');
writeFileSync(FILE, LOG);
afterAll(() => rmSync(DIRECTORY, { recursive: true, force: true }));
const files = { files: { command: process.execPath, args: [packageFile('@modelcontextprotocol/server-filesystem', 'dist/index.js'), DIRECTORY] } };

/**
 * The fake model, playing an agent that pages: it reads the log, then greps the artifact it was given for
 * the needle, reads the lines around the match, and answers with the line it found. It decides from what
 * the request it is sent holds, as a model would.
 */
function pagingAgent(request: FakeRequest): FakeReply {
  const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
  if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'files__read_text_file', args: { path: FILE } }] };
  const match = /(\d+): [^"\\]*FATAL the needle/.exec(request.body);
  if (match === null) return { kind: 'turn', toolCalls: [{ name: 'klym__grep_artifact', args: { artifact, pattern: 'FATAL.*needle' } }] };
  if (!request.body.includes('(line: text; 0-based):\\n') || !/lines \d+-\d+ of/.test(request.body)) {
    return { kind: 'turn', toolCalls: [{ name: 'klym__read_artifact', args: { artifact, offset: Number(match[1]) - 1, limit: 3 } }] };
  }
  return { kind: 'turn', text: `The needle is on line ${match[1]}: disk /dev/sdq failed.` };
}

async function setUp(runner: 'inline' | 'thread'): Promise<{ tasks: TaskManager; store: TaskStore; requests: FakeRequest[] }> {
  const directory = temporaryDirectory();
  const store = await createSqliteTaskStore({ path: path.join(directory.path, 'tasks.db') });
  const pool = await createSessionPool({ upstreams: files });
  const llm = await startFakeLlmServer(pagingAgent, { contextWindow: WINDOW });
  const run: AgentRunner | undefined = runner === 'thread' ? createThreadRunner({ upstreams: files, drainTimeoutMs: 100 }) : undefined;
  const tasks = createTaskManager({
    pool,
    store,
    ...(run === undefined ? {} : { run }),
    defaults: {
      model: 'openai:gpt-4.1-mini',
      providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } },
      contextWindows: { 'openai:gpt-4.1-mini': WINDOW },
    },
  });
  cleanups.push(
    async () => directory[Symbol.dispose](),
    () => store.close(),
    () => pool.close({ drainTimeoutMs: 100 }),
    () => llm.close(),
    async () => (run as { close?: () => Promise<void> } | undefined)?.close?.(),
    () => tasks.close({ graceMs: 0 }),
  );
  return { tasks, store, requests: llm.requests };
}

async function ended(tasks: TaskManager, id: string): Promise<TaskRecord> {
  await expect.poll(async () => (await tasks.get(id, me)).status, { timeout: 30_000 }).toMatch(/completed|error|cancelled/);
  return tasks.get(id, me);
}

describe('big results become artifacts of their task', () => {
  for (const runner of ['inline', 'thread'] as const) {
    it(`finds a needle in a ${(LOG.length / 1e6).toFixed(1)} MB log it is never sent, by grep and read over the artifact (${runner})`, async () => {
      const { tasks, store, requests } = await setUp(runner);
      const task = await tasks.start({ prompt: 'On which line of the log did the disk fail?' }, me);

      expect(await ended(tasks, task.id)).toMatchObject({ status: 'completed', result: { text: `The needle is on line ${NEEDLE_AT}: disk /dev/sdq failed.` } });
      // read_log, grep, read, answer: four requests, none of which carried the log.
      expect(requests).toHaveLength(4);
      const largest = Math.max(...requests.map((request) => request.body.length));
      expect(largest).toBeLessThan(LOG.length / 100);
      // Counted as the provider counts them: never near the window, which the log passes many times over.
      expect(Math.max(...requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY))).toBeLessThan(0.95 * WINDOW);
      expect(LOG.length / 4).toBeGreaterThan(10 * WINDOW);
      expect(requests.some((request) => request.body.includes(LOG.split('\n')[20_000] as string))).toBe(false);

      // The log is kept whole, once (its structuredContent copy was not kept again), in the task's store.
      const artifacts = await store.listArtifacts(task.id);
      expect(artifacts).toEqual([expect.objectContaining({ tool: 'files__read_text_file', bytes: Buffer.byteLength(LOG), lines: LINES })]);
      expect((await store.loadArtifact(task.id, artifacts[0]?.id as string))?.text).toBe(LOG);
      const kept = (await tasks.logs(task.id, me, { limit: 500 })).entries.filter((entry) => entry.type === 'artifact-kept');
      expect(kept).toHaveLength(1);
    });
  }
});

/** A run that reads the log (kept as an artifact) and answers from the grep it made over it. */
const reader: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: ({ call, options: callOptions }) => {
        if (call === 1) return { toolCalls: [{ toolName: 'big__read_log', args: { lines: LINES, needle_at: NEEDLE_AT } }] };
        const artifact = /artifact (art_[0-9a-f]{12})/.exec(JSON.stringify(callOptions.prompt))?.[1] ?? 'none';
        return call === 2 ? { toolCalls: [{ toolName: 'klym__grep_artifact', args: { artifact, pattern: 'needle' } }] } : { text: `found it in ${artifact}` };
      },
    }),
  });

describe("Grynya sees a task's artifacts", () => {
  const TOKENS = { grynya: 'the-token-of-grynya-123456', other: 'the-token-of-other-1234567' };

  it('lists them in check_task_status within its glance, and serves their lines to the owner only, over MCP and REST', async () => {
    const server = await startKlymServer({ port: 0, upstreams, auth: { tokens: TOKENS }, tasks: { run: reader, shutdownGraceMs: 0 }, log: () => {} });
    cleanups.push(() => server.close());
    const grynya = new Client({ name: 'grynya', version: '1.0.0' });
    await grynya.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${TOKENS.grynya}` } } }));
    const other = new Client({ name: 'other', version: '1.0.0' });
    await other.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${TOKENS.other}` } } }));
    cleanups.push(
      () => grynya.close(),
      () => other.close(),
    );

    const { task_id: taskId } = payload(await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'find the needle' } })) as {
      task_id: string;
    };
    const status = await waitForEnd(grynya, taskId, 30_000);
    expect(status).toMatchObject({
      status: 'completed',
      artifacts: [{ id: expect.stringMatching(/^art_/), tool: 'big__read_log', bytes: Buffer.byteLength(LOG), lines: LINES }],
    });
    const glance = (await grynya.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).content as { text: string }[];
    expect(glance[0]?.text.length).toBeLessThanOrEqual(1_200);
    const artifact = (status.artifacts as { id: string }[])[0]?.id as string;
    expect(status.result).toBe(`found it in ${artifact}`);

    const slice = payload(await grynya.callTool({ name: 'read_task_artifact', arguments: { task_id: taskId, artifact, offset: NEEDLE_AT, limit: 2 } }));
    expect(slice).toEqual({
      task_id: taskId,
      artifact: { id: artifact, tool: 'big__read_log', bytes: Buffer.byteLength(LOG), lines: LINES },
      offset: NEEDLE_AT,
      lines: LOG.split('\n').slice(NEEDLE_AT, NEEDLE_AT + 2),
      next_offset: NEEDLE_AT + 2,
    });
    const past = await grynya.callTool({ name: 'read_task_artifact', arguments: { task_id: taskId, artifact, offset: LINES } });
    expect(past).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'INVALID_ARGUMENT', message: expect.stringContaining(`${LINES} is past the end`) } },
    });
    const unknown = await grynya.callTool({ name: 'read_task_artifact', arguments: { task_id: taskId, artifact: 'art_000000000000' } });
    expect(unknown).toMatchObject({ isError: true, structuredContent: { error: { code: 'ARTIFACT_NOT_FOUND' } } });
    // Another principal gets what an unknown task gets.
    const stranger = await other.callTool({ name: 'read_task_artifact', arguments: { task_id: taskId, artifact } });
    const nobody = await other.callTool({ name: 'read_task_artifact', arguments: { task_id: 'no-such-task', artifact } });
    expect(stranger).toMatchObject({ isError: true, structuredContent: { error: { code: 'TASK_NOT_FOUND' } } });
    expect((stranger.structuredContent as { error: { message: string } }).error.message).toBe(
      (nobody.structuredContent as { error: { message: string } }).error.message.replace('no-such-task', taskId),
    );

    const rest = (token: string, query = '') =>
      fetch(`${server.url}/api/tasks/${taskId}/artifacts/${artifact}${query}`, { headers: { Authorization: `Bearer ${token}` } });
    const page = await rest(TOKENS.grynya, `?offset=${NEEDLE_AT}&limit=1`);
    expect(page.status).toBe(200);
    expect(await page.json()).toMatchObject({ offset: NEEDLE_AT, lines: [LOG.split('\n')[NEEDLE_AT]], next_offset: NEEDLE_AT + 1 });
    expect((await rest(TOKENS.other)).status).toBe(404);
    expect((await rest(TOKENS.grynya, '?limit=0')).status).toBe(400);
  });
});

describe("the dashboard shows a task's artifacts", () => {
  it('lists each one in the timeline with its size and first lines, and pages through it', async () => {
    const server = await startKlymServer({ port: 0, upstreams, tasks: { run: reader, shutdownGraceMs: 0 }, log: () => {} });
    cleanups.push(() => server.close());
    const started = (await (
      await fetch(`${server.url}/api/tasks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'find the needle' }),
      })
    ).json()) as { task_id: string };
    await expect
      .poll(async () => ((await (await fetch(`${server.url}/api/tasks/${started.task_id}`)).json()) as { status: string }).status, { timeout: 30_000 })
      .toBe('completed');

    const page = await (await fetch(`${server.url}/dashboard/tasks/${started.task_id}`)).text();
    const note = /<li class="note note-artifact-kept" data-artifact="(art_[0-9a-f]{12})">([\s\S]*?)<\/li>/.exec(page);
    expect(note?.[2]).toContain(`${Buffer.byteLength(LOG).toLocaleString('en-US')} bytes, ${LINES.toLocaleString('en-US')} lines`);
    for (const line of LOG.split('\n').slice(0, 5)) expect(note?.[2]).toContain(line);
    const artifact = note?.[1] as string;
    expect(page).toContain(`href="/dashboard/tasks/${started.task_id}/artifacts/${artifact}"`);

    const first = await (await fetch(`${server.url}/dashboard/tasks/${started.task_id}/artifacts/${artifact}`)).text();
    expect(first).toContain(`<li value="199"><code>${LOG.split('\n')[199]}</code></li>`);
    expect(first).not.toContain('<li value="200">');
    expect(first).toContain(`href="/dashboard/tasks/${started.task_id}/artifacts/${artifact}?offset=200"`);
    const needle = await (await fetch(`${server.url}/dashboard/tasks/${started.task_id}/artifacts/${artifact}?offset=${NEEDLE_AT}`)).text();
    expect(needle).toContain(`<li value="${NEEDLE_AT}"><code>${LOG.split('\n')[NEEDLE_AT]}</code></li>`);
    expect(needle).toContain(`rel="prev" href="/dashboard/tasks/${started.task_id}/artifacts/${artifact}?offset=${NEEDLE_AT - 200}"`);
    expect((await fetch(`${server.url}/dashboard/tasks/${started.task_id}/artifacts/art_000000000000`)).status).toBe(404);
  });
});
