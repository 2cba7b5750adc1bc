import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { runAgent } from '../agent/run-agent.ts';
import type { ServiceRunSettings } from '../agent/run-settings.ts';
import type { RunAgentOptions } from '../agent/types.ts';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createMockModel, type MockStep } from '../testing/mock-model.ts';
import { runResult } from '../testing/run-result.ts';
import { createMemoryTaskStore } from './store/memory-task-store.ts';
import type { AgentRunner } from './task-manager-types.ts';
import { parseArgs, startTaskSchema } from './task-request.ts';
import { createTaskService, type TaskService, type TaskServiceOptions } from './task-service.ts';
import type { TaskRecord, TaskStore } from './store/task-types.ts';
import { estimateTokens } from '../agent/token-count.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const ok = (text: string) => ({ content: [{ type: 'text' as const, text }] });

/** A small graph server: one read-only tool by annotation, one read-only by configuration only, two that write. */
function graphServer(): McpServer {
  const server = new McpServer({ name: 'graph', version: '1.0.0' });
  server.registerTool('get_node', { description: 'A node by id', inputSchema: { id: z.string() }, annotations: { readOnlyHint: true } }, ({ id }) =>
    ok(`node ${id}`),
  );
  server.registerTool('query_graph', { description: 'Runs a Cypher query', inputSchema: { query: z.string() } }, () =>
    ok('{"status":"success","result":[[3]]}'),
  );
  server.registerTool('add_node', { description: 'Adds a node', inputSchema: { id: z.string() } }, () => ok('{"status":"success"}'));
  server.registerTool('delete_node', { description: 'Deletes a node', inputSchema: { id: z.string() } }, () => ok('{"status":"success"}'));
  return server;
}

async function graphPool(): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { grynya: createInMemoryUpstream(graphServer) } });
  cleanups.push(() => pool.close());
  await pool.warmedUp();
  return pool;
}

function service(pool: SessionPool, options: Partial<TaskServiceOptions> = {}): TaskService {
  const created = createTaskService({ pool, shutdownGraceMs: 0, ...options });
  cleanups.push(() => created.close());
  return created;
}

/** runAgent itself, on a mock model scripted step by step (each task gets a fresh script). */
const scripted =
  (steps: () => readonly MockStep[]): AgentRunner =>
  (options) =>
    runAgent({ ...options, model: createMockModel(steps()) });

const finishesAtOnce: AgentRunner = async () => runResult('done', { usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2, estimated: false } });

/** Runs that last until cancelled. */
const held: AgentRunner = (options) =>
  new Promise((resolve) => options.signal?.addEventListener('abort', () => resolve(runResult('stopped', { finishReason: 'cancelled' })), { once: true }));

/** A text of `length` characters that JSON escapes the most: quotes, backslashes, newlines, control characters. */
const longest = (length: number, unit = '"\\\n\u0001é'): string => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

const ended = async (klym: TaskService, taskId: string, principal = 'grynya'): Promise<void> => {
  await vi.waitFor(async () => expect((await klym.status({ task_id: taskId }, principal)).status).toMatch(/completed|error|cancelled/), { timeout: 5_000 });
};

describe('createTaskService: narrowing a request', () => {
  it('refuses a model outside the allow-list, naming the field and the choices', async () => {
    const klym = service(await graphPool(), { models: ['scripted', 'openai:gpt-4.1-mini'], run: finishesAtOnce });
    await expect(klym.start({ prompt: 'x', model: 'http://attacker.example/v1' }, 'grynya')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: '`model`: "http://attacker.example/v1" is not offered here; choose one of: scripted, openai:gpt-4.1-mini',
    });
    // The wire's own checks are the edge's, with the schema the MCP SDK and REST parse with.
    expect(() => parseArgs(startTaskSchema, { prompt: 'x', budget: { max_steps: -1 } })).toThrow(/^`budget\.max_steps`/);
    expect(() => parseArgs(startTaskSchema, { prompt: 'x', surprise: 1 })).toThrow(/^`surprise`/);
  });

  it("caps each budget field at the server's maximum and fills in the default", async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce, defaultBudget: { maxSteps: 5 }, maxBudget: { maxSteps: 10, timeoutMs: 60_000 } });
    expect(await klym.start({ prompt: 'x', budget: { max_steps: 1_000, timeout_ms: 10_000_000, max_tokens: 500 } }, 'grynya')).toMatchObject({
      model: 'scripted',
      budget: { max_steps: 10, timeout_ms: 60_000, max_tokens: 500 },
    });
    expect((await klym.start({ prompt: 'x' }, 'grynya')).budget).toEqual({ max_steps: 5, timeout_ms: 60_000 });
  });

  it("intersects the caller's allow list with the server's over the real tool names, leaving out tools the upstream denies", async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce, tools: { allow: ['grynya__*'] }, upstreamTools: { grynya: { deny: ['delete_*'] } } });
    const { task_id: taskId } = await klym.start({ prompt: 'x', tools: { allow: ['*_node'], deny: ['grynya__add_*'] } }, 'grynya');
    const task = await klym.tasks.get(taskId, { principal: 'grynya' });
    expect(task.request.tools).toEqual({ allow: ['grynya__get_node', 'grynya__add_node'], deny: ['grynya__add_*'] });
    await expect(klym.start({ prompt: 'x', tools: { allow: ['grynya__delete_node'] } }, 'grynya')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^`tools\.allow`: matches none of the tools/),
    });
  });

  it('matches hostile patterns full of `*` at once (a RegExp of `.*`s would backtrack for minutes)', async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce, tools: { allow: ['grynya__*'] } });
    const hostile = `${'*a'.repeat(60)}Z`;
    const before = performance.now();
    const { task_id: taskId } = await klym.start({ prompt: 'x', tools: { allow: [hostile, 'grynya__get_*'], deny: [hostile] } }, 'grynya');
    expect(performance.now() - before).toBeLessThan(1_000);
    expect((await klym.tasks.get(taskId, { principal: 'grynya' })).request.tools).toEqual({ allow: ['grynya__get_node'], deny: [hostile] });
  });

  it('takes a policy a caller names only if it exists, and never another than the server runs under', async () => {
    const open = service(await graphPool(), { run: finishesAtOnce, policies: { 'graph-read': { allow: ['grynya__get_*'] } } });
    await expect(open.start({ prompt: 'x', tools: { policy: 'everything' } }, 'grynya')).rejects.toMatchObject({
      message: '`tools.policy`: "everything" is not a policy here; choose one of: read-only, graph-read',
    });
    const { task_id: taskId } = await open.start({ prompt: 'x', tools: { policy: 'graph-read' } }, 'grynya');
    expect((await open.tasks.get(taskId, { principal: 'grynya' })).request.tools).toEqual({ policy: 'graph-read' });

    const fixed = service(await graphPool(), { run: finishesAtOnce, tools: { policy: 'read-only' }, policies: { 'graph-read': {} } });
    await expect(fixed.start({ prompt: 'x', tools: { policy: 'graph-read' } }, 'grynya')).rejects.toMatchObject({
      message: '`tools.policy`: tasks here always run under the policy "read-only"',
    });
    expect(() => createTaskService({ pool: {} as SessionPool, tools: { policy: 'nope' } })).toThrow(/Unknown tool policy "nope"/);
  });
});

describe('createTaskService: capabilities', () => {
  it('advertises only the tools a run may call: upstream deny rules and the read-only policy with per-upstream readOnlyTools', async () => {
    const pool = await graphPool();
    const denying = service(pool, { upstreamTools: { grynya: { deny: ['delete_*'] } } });
    const names = (await denying.capabilities()).tools.map((tool) => tool.name);
    expect(names).toEqual(['grynya__get_node', 'grynya__query_graph', 'grynya__add_node']);

    const readOnly = service(pool, { tools: { policy: 'read-only' }, upstreamTools: { grynya: { readOnlyTools: ['query_graph'] } } });
    const described = await readOnly.capabilities();
    expect(described.tools).toEqual([
      { name: 'grynya__get_node', read_only: true, description: 'A node by id' },
      { name: 'grynya__query_graph', read_only: true, description: 'Runs a Cypher query' },
    ]);
    expect(described).toMatchObject({
      upstreams: { grynya: { state: 'ready', tools: 4 } },
      default_model: 'scripted',
      policies: ['read-only'],
      server_tool_policy: { policy: 'read-only' },
    });

    // Tools whose calls wait for the caller's approval say so: the server's patterns and the upstream's own.
    const approving = service(pool, { tools: { approval: ['grynya__add_*'] }, upstreamTools: { grynya: { approval: ['delete_node'] } } });
    const flagged = (await approving.capabilities()).tools.filter((tool) => tool.needs_approval === true).map((tool) => tool.name);
    expect(flagged).toEqual(['grynya__add_node', 'grynya__delete_node']);
  });

  it('removes secret-shaped text from an upstream error, and configured secrets too', async () => {
    const pool = await createSessionPool({
      upstreams: {
        grynya: createInMemoryUpstream(graphServer),
        broken: {
          connect: async () => {
            throw new Error('HTTP 401 for Authorization: Bearer abcdef123456 with key sk-proj-0123456789abcdefXYZ and my-configured-secret');
          },
          pool: { min: 0 },
        },
      },
    });
    cleanups.push(() => pool.close());
    // `broken` opens nothing by itself (pool.min 0): a listing tries it, and it is then down with its error.
    await pool.listTools();
    const klym = service(pool, { secrets: ['my-configured-secret'] });
    const described = await klym.capabilities();
    expect(described.upstreams.broken?.error).toMatch(/HTTP 401/);
    const text = JSON.stringify(described);
    for (const secret of ['abcdef123456', 'sk-proj-0123456789abcdefXYZ', 'my-configured-secret']) expect(text).not.toContain(secret);
    expect(described.upstreams.grynya).toEqual({ state: 'ready', protocol_version: '2025-11-25', tools: 4 });
  });
});

describe('createTaskService: tasks', () => {
  it('answers a status read that arrives with a burst of starts before any of the starts is stored', async () => {
    const store = createMemoryTaskStore();
    const inserted: string[] = [];
    const insert = store.insert.bind(store);
    store.insert = async (task) => {
      inserted.push(task.id);
      return insert(task);
    };
    const klym = service(await graphPool(), { run: finishesAtOnce, store });
    const { task_id: taskId } = await klym.start({ prompt: 'earlier' }, 'grynya');
    inserted.length = 0;
    // The reads and the starts of one turn of the loop, in the order they were read: the starts first.
    const starts = Array.from({ length: 16 }, (_, index) => klym.start({ prompt: `burst ${index}` }, 'grynya'));
    const storedWhenAnswered = await klym.status({ task_id: taskId }, 'grynya').then(() => inserted.length);
    expect(storedWhenAnswered).toBe(0);
    expect((await Promise.all(starts)).map((view) => view.status)).toEqual(
      Array.from({ length: 16 }, () => expect.stringMatching(/pending|running|completed/)),
    );
    expect(inserted).toHaveLength(16);
  });

  it('pages through more than 50 tasks with a cursor, newest first, down to the oldest', async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce });
    const ids: string[] = [];
    for (let index = 0; index < 120; index++) ids.push((await klym.start({ prompt: `task ${index}` }, 'grynya')).task_id);
    await klym.start({ prompt: 'not yours' }, 'mallory');

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await klym.list(cursor === undefined ? {} : { cursor }, 'grynya');
      expect(page.total).toBe(120);
      seen.push(...page.tasks.map((task) => task.task_id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids.toReversed());
    expect((await klym.list({ limit: 7 }, 'grynya')).tasks.map((task) => task.prompt)).toEqual(Array.from({ length: 7 }, (_, index) => `task ${119 - index}`));
    await expect(klym.list({ cursor: 'not-a-cursor' }, 'grynya')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^`cursor`/),
    });
  });

  it('answers a start with an idempotency key the principal used before with that task, whatever its status', async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce });
    const first = await klym.start({ prompt: 'check the graph', idempotency_key: 'job-1' }, 'grynya');
    await ended(klym, first.task_id);
    const again = await klym.start({ prompt: 'check the graph', idempotency_key: 'job-1' }, 'grynya');
    expect(again).toMatchObject({ task_id: first.task_id, status: 'completed' });
    const other = await klym.start({ prompt: 'check the graph', idempotency_key: 'job-1' }, 'mallory');
    expect(other.task_id).not.toBe(first.task_id);
    const fresh = await klym.start({ prompt: 'check the graph', idempotency_key: 'job-2' }, 'grynya');
    expect(fresh.task_id).not.toBe(first.task_id);
    expect((await klym.list({}, 'grynya')).total).toBe(2);
  });

  it("shows the final answer by default, not every step's narration, with the budget's use beside its limits and the elapsed time", async () => {
    const finalAnswer = `The graph holds 3 nodes. ${'Details. '.repeat(60)}`;
    const klym = service(await graphPool(), {
      run: scripted(() => [
        { text: 'Let me query the graph first.', toolCalls: [{ name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }] },
        { text: finalAnswer },
      ]),
      maxBudget: { maxSteps: 10, maxTokens: 10_000 },
    });
    const { task_id: taskId } = await klym.start({ prompt: 'Count the nodes', budget: { max_steps: 4 } }, 'grynya');
    await ended(klym, taskId);

    const glance = await klym.status({ task_id: taskId }, 'grynya');
    expect(glance).toMatchObject({
      status: 'completed',
      result: `${finalAnswer.slice(0, 399)}…`,
      result_truncated: true,
      result_chars: finalAnswer.length,
      budget: { steps: 2, max_steps: 4, tokens: 240, max_tokens: 10_000, timeout_ms: 1_800_000 },
      elapsed_ms: expect.any(Number),
    });
    expect(glance.result).not.toContain('Let me query');
    expect(JSON.stringify(glance).length).toBeLessThanOrEqual(1_200);

    const full = await klym.status({ task_id: taskId, full_result: true }, 'grynya');
    expect(full.result).toBe(finalAnswer);
    expect(full.result_truncated).toBeUndefined();
    expect(full.transcript).toBe(`Let me query the graph first.\n\n${finalAnswer}`);
  });

  it('says first, in its result, that a budget stopped its run before the work was done', async () => {
    const query = { name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } };
    const klym = service(await graphPool(), {
      run: scripted(() => [
        { text: 'Counting the first half.', toolCalls: [query], usage: { input: 200, output: 20 } },
        { text: 'So far: 3 nodes in the first half.', toolCalls: [query], usage: { input: 260, output: 20 } },
        { text: 'The graph holds 6 nodes.' },
      ]),
    });
    const { task_id: taskId } = await klym.start({ prompt: 'Count the nodes', budget: { max_tokens: 500 } }, 'grynya');
    await ended(klym, taskId);

    const notice = 'Stopped by the budget (max_tokens 500: 500 spent) before the work was done: this answer is partial.';
    const full = await klym.status({ task_id: taskId, full_result: true }, 'grynya');
    // `completed`, as a run a budget ended always was; its finish reason kept, and its answer no longer looks whole.
    expect(full).toMatchObject({ status: 'completed', finish_reason: 'budget:tokens', budget: { tokens: 500, max_tokens: 500 } });
    expect(full.result).toBe(`${notice}\n\nSo far: 3 nodes in the first half.`);
    expect(full.transcript).toBe(`${notice}\n\nCounting the first half.\n\nSo far: 3 nodes in the first half.`);
    // The glance cuts the answer from its end: the notice stays first.
    expect((await klym.status({ task_id: taskId }, 'grynya')).result?.split('\n')[0]).toBe(notice);
  });

  it('keeps the default status of any task within 1,200 characters of JSON', async () => {
    const store = createMemoryTaskStore();
    const id = 'x'.repeat(22);
    const tool = `grynya__${'q'.repeat(56)}`;
    const longestTask: TaskRecord = {
      id,
      principal: 'grynya',
      request: {
        prompt: longest(200_000),
        model: `compatible:${'m'.repeat(189)}`,
        budget: { maxSteps: 100, maxTokens: 1e9, maxCostUsd: 1_000_000.5, timeoutMs: 2_147_483_647 },
      },
      status: 'completed',
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:01.000Z',
      finishedAt: '2026-01-01T10:00:00.000Z',
      currentStep: `step 100: ${tool} answered with an error ${longest(4_000)}`,
      usage: { steps: 100, inputTokens: 5e8, outputTokens: 5e8, totalTokens: 1e9, costUsd: 999_999.123456789 },
      result: {
        text: longest(100_000),
        finalText: longest(50_000),
        finishReason: `budget:${longest(100)}`,
        model: `compatible:${'m'.repeat(189)}`,
        toolCalls: 1_000,
      },
      writeBack: { status: 'failed', nodeId: `klym_${id}`, dayId: 'd_2026_01_01', error: longest(4_000) },
      elapsedMs: 2_147_483_647,
      resumes: Array.from({ length: 1_000 }, (_, index) => index + 1),
    };
    const { result: _result, writeBack: _writeBack, ...unfinished } = longestTask;
    // The manager says `done` of a completed task; a running one has the longest steps.
    const completedTask: TaskRecord = { ...longestTask, currentStep: 'done' };
    // What each status can hold at its longest, and a record holding every text at once (no task does).
    const tasks: TaskRecord[] = [
      completedTask,
      { ...unfinished, id: `${id.slice(0, 21)}1`, status: 'error', error: { code: 'STORE_UNAVAILABLE', message: longest(4_000) } },
      { ...unfinished, id: `${id.slice(0, 21)}2`, status: 'cancelled', cancelReason: longest(1_000) },
    ];
    const running: TaskRecord = { ...unfinished, id: `${id.slice(0, 21)}3`, status: 'running', finishedAt: undefined };
    const chimera: TaskRecord = {
      ...longestTask,
      id: `${id.slice(0, 21)}4`,
      error: { code: 'INTERNAL', message: longest(4_000) },
      cancelReason: longest(1_000),
    };
    for (const task of [...tasks, chimera]) {
      await store.insert(task);
      for (let index = 0; index < 10; index++) {
        store.appendLog(task.id, 'tool-call', { step: 100, toolCallId: 'c'.repeat(40), toolName: tool, args: { query: longest(2_000) } });
        store.appendLog(task.id, 'upstream-log', { upstream: 'g'.repeat(32), source: 'stderr', level: 'emergency', message: longest(4_000) });
      }
    }
    const klym = service(await graphPool(), { store, run: finishesAtOnce });
    // Inserted after the service started, so that its manager does not take the task up as one a dead process left.
    await store.insert(running);
    store.appendLog(running.id, 'tool-call', { step: 100, toolCallId: 'c'.repeat(40), toolName: tool, args: { query: longest(2_000) } });
    tasks.push(running);
    for (const task of tasks) {
      const glance = await klym.status({ task_id: task.id }, 'grynya');
      expect(JSON.stringify(glance).length).toBeLessThanOrEqual(1_200);
      expect(glance).toMatchObject({
        task_id: task.id,
        status: task.status,
        budget: { steps: 100, max_steps: 100 },
        resumed_from: [991, 992, 993, 994, 995, 996, 997, 998, 999, 1_000],
        resumes: 1_000,
      });
      expect(glance.log?.entries.length).toBeGreaterThan(0);
    }
    const { step } = await klym.status({ task_id: running.id }, 'grynya');
    expect(step).toMatch(/^step 100: grynya__q{56} answered with an error .*…$/s);
    expect(JSON.stringify(step).length).toBeLessThanOrEqual(102);
    const completed = await klym.status({ task_id: longestTask.id }, 'grynya');
    expect(completed).toMatchObject({
      result: expect.stringMatching(/…$/),
      result_truncated: true,
      result_chars: 50_000,
      write_back: { status: 'failed', node_id: `klym_${id}` },
    });
    expect(JSON.stringify(await klym.status({ task_id: chimera.id }, 'grynya')).length).toBeLessThanOrEqual(1_200);
  });

  it('hands every run setting of RUN_SETTINGS to each task’s run as the service was given it', async () => {
    // `Required<…>` makes a new row of the table a compile error here until it has a value to check.
    const settings = {
      temperature: 0.3,
      providers: { compatible: { baseURL: 'http://127.0.0.1:9/v1' } },
      prices: { 'compatible:llama3': { inputPerMillion: 1, outputPerMillion: 2 } },
      contextWindows: { 'compatible:llama3': 8_192 },
      mapModel: 'scripted',
      mapConcurrency: 2,
      mapChunkTokens: 1_000,
      artifactThresholdTokens: 500,
      maxRetries: 0,
      upstreamTools: { grynya: { readOnlyTools: ['query_graph'] } },
      policies: { reader: { allow: ['grynya__get_*'] } },
      readOnlyTools: ['grynya__query_graph'],
      code: { memoryMiB: 32, timeoutMs: 5_000, maxRows: 100 },
    } satisfies Required<ServiceRunSettings>;
    const runs: RunAgentOptions[] = [];
    const klym = service(await graphPool(), { ...settings, run: async (options) => (runs.push(options), finishesAtOnce(options)) });
    for (const prompt of ['a', 'b']) await ended(klym, (await klym.start({ prompt }, 'grynya')).task_id);
    expect(runs).toEqual([expect.objectContaining(settings), expect.objectContaining(settings)]);
  });

  it('reports health without secrets, and lets subscribers see task events', async () => {
    const klym = service(await graphPool(), { run: finishesAtOnce });
    const events: string[] = [];
    const unsubscribe = klym.onEvent((event) => events.push(event.type));
    const { task_id: taskId } = await klym.start({ prompt: 'x' }, 'grynya');
    await ended(klym, taskId);
    unsubscribe();
    expect(events).toEqual(['task-create', 'task-start', 'task-end']);
    expect(await klym.health()).toEqual({
      status: 'ok',
      upstreams: { grynya: { state: 'ready', transport: 'custom', protocolVersion: '2025-11-25', sessions: 1, breaker: 'closed' } },
      tasks: { pending: 0, running: 0, input_required: 0, completed: 1, error: 0, cancelled: 0 },
    });
    expect(await klym.cancel({ task_id: taskId }, 'grynya')).toMatchObject({ cancelled: false, status: 'completed' });
    await expect(klym.cancel({ task_id: taskId }, 'mallory')).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    expect(await klym.logs({ task_id: taskId, limit: 2 }, 'grynya')).toMatchObject({
      task_id: taskId,
      entries: [
        { seq: 1, type: 'task-create' },
        { seq: 2, type: 'task-start' },
      ],
      more: true,
    });
  });

  it('shows a waiting task its queue_position, and each caller its own quotas and use', async () => {
    const klym = service(await graphPool(), {
      run: held,
      maxConcurrent: 1,
      perPrincipal: { maxQueued: 3, overrides: { batch: { maxRunning: 1, maxQueued: 10 } } },
    });
    const started: string[] = [];
    for (const prompt of ['b1', 'b2', 'b3']) started.push((await klym.start({ prompt }, 'batch')).task_id);
    const { task_id: mine } = await klym.start({ prompt: 'g1' }, 'grynya');
    expect(await klym.status({ task_id: started[0] as string }, 'batch')).not.toHaveProperty('queue_position');
    // Grynya's first goes before batch's second and third.
    expect(await klym.status({ task_id: mine }, 'grynya')).toMatchObject({ status: 'pending', step: 'queued', queue_position: 0 });
    expect(await klym.status({ task_id: started[2] as string }, 'batch')).toMatchObject({ queue_position: 2 });
    expect(await klym.quota('batch')).toEqual({
      principal: 'batch',
      quotas: { max_running: 1, max_queued: 10 },
      use: { running: 1, queued: 2, tokens_today: 0, usd_today: 0 },
      day_resets_at: expect.any(String),
    });
    expect((await klym.capabilities('grynya')).quota).toEqual({
      principal: 'grynya',
      quotas: { max_queued: 3 },
      use: { running: 0, queued: 1, tokens_today: 0, usd_today: 0 },
      day_resets_at: expect.any(String),
    });
    expect(await klym.capabilities()).not.toHaveProperty('quota');
  });
});

/** A memory store that says what it was asked for: whole artifacts, and the byte ranges of their texts. */
function watchedStore(): { store: TaskStore; wholes: string[]; ranges: [number, number][] } {
  const inner = createMemoryTaskStore();
  const wholes: string[] = [];
  const ranges: [number, number][] = [];
  const store: TaskStore = {
    ...inner,
    loadArtifact: (id, artifactId) => {
      wholes.push(artifactId);
      return inner.loadArtifact(id, artifactId);
    },
    loadArtifactRange: (id, artifactId, start, end) => {
      ranges.push([start, end]);
      return inner.loadArtifactRange(id, artifactId, start, end);
    },
  };
  cleanups.push(() => inner.close());
  return { store, wholes, ranges };
}

describe('createTaskService: reading artifacts', () => {
  it('pages through a 20-million-character line by ranges of a page each, tokenizing a bounded multiple of it', async () => {
    const { store, wholes, ranges } = watchedStore();
    let counted = 0;
    const countTokens = (text: string): number => {
      counted += text.length;
      return estimateTokens(text);
    };
    const klym = service(await graphPool(), { store, run: finishesAtOnce, artifactReading: { countTokens } });
    const { task_id: taskId } = await klym.start({ prompt: 'read' }, 'grynya');
    await ended(klym, taskId);
    const line = 'the quick brown fox — jumps over 🦊 the lazy dog, é; '.repeat(400_000).slice(0, 20_000_000);
    const text = `first line\n${line}\r\nlast line`;
    await store.saveArtifact(taskId, {
      id: 'art_00000000000a',
      tool: 'fs__read_text_file',
      bytes: Buffer.byteLength(text),
      lines: 3,
      tokens: 0,
      createdAt: '2026-01-01T00:00:00.000Z',
      text,
    });

    const parts: string[] = [];
    let read = 0;
    let next: { offset: number; char_offset?: number } | undefined = { offset: 1 };
    let after: readonly string[] = [];
    while (next?.offset === 1) {
      const page = await klym.readArtifact({ task_id: taskId, artifact: 'art_00000000000a', offset: 1, char_offset: next.char_offset ?? 0 }, 'grynya');
      const [first = '', ...rest] = page.lines ?? [];
      parts.push(first);
      read += first.length;
      after = rest;
      next =
        page.next_offset === undefined
          ? undefined
          : { offset: page.next_offset, ...(page.next_char_offset === undefined ? {} : { char_offset: page.next_char_offset }) };
      // Each page counts about a page's worth, and loads about that: never the whole rest of the line.
      expect(counted).toBeLessThanOrEqual(16 * (read + 8_000 * 16));
      expect(ranges.length === 1 || (ranges.at(-1) as [number, number])[1] - (ranges.at(-1) as [number, number])[0] <= 3 * 8_000 * 16 + 65_536 * 3 + 4).toBe(
        true,
      );
    }
    expect(parts.join('')).toBe(line);
    expect(after).toEqual(['last line']);
    expect(next).toBeUndefined();
    expect(counted).toBeLessThanOrEqual(8 * line.length);
    // The front never loaded the artifact whole through loadArtifact; one range covered it once, to index its lines.
    expect(wholes).toEqual([]);
    expect(ranges.filter(([start, end]) => end - start >= line.length)).toHaveLength(1);
    const asked = ranges.reduce((sum, [start, end]) => sum + end - start, 0);
    console.log(
      `read_task_artifact: ${parts.length} pages of a 20,000,000-character line tokenized ${counted.toLocaleString('en-US')} characters; the store gave ${ranges.length} ranges, ${asked.toLocaleString('en-US')} bytes (the text has ${Buffer.byteLength(text).toLocaleString('en-US')})`,
    );
  });
});
