import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { runAgent } from '../agent/run-agent.ts';
import { createScriptedModel, type ScriptedCall } from '../agent/scripted-model.ts';
import { CODE_TOOL_NAME } from '../code/code-tool.ts';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSqliteTaskStore } from './store/sqlite/sqlite-task-store.ts';
import { createTaskManager } from './task-manager.ts';
import { openManager, waitForStatus as waitFor } from './task-manager.test-support.ts';
import type { TaskManager, TaskManagerOptions } from './task-manager-types.ts';
import type { TaskRecord } from './store/task-types.ts';

const me = { principal: 'grynya' };

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** An upstream with a write (`add_note`, which keeps what it was sent) and a read (`list_notes`). */
function notesUpstream(): { notes: string[]; server: () => McpServer } {
  const notes: string[] = [];
  const server = (): McpServer => {
    const mcp = new McpServer({ name: 'notes', version: '1.0.0' });
    mcp.registerTool('add_note', { inputSchema: { text: z.string() } }, ({ text }) => {
      notes.push(text);
      return { content: [{ type: 'text', text: `added note ${notes.length}` }] };
    });
    mcp.registerTool('list_notes', { annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: JSON.stringify(notes) }] }));
    return mcp;
  };
  return { notes, server };
}

async function openPool(server: () => McpServer): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { notes: createInMemoryUpstream(server) } });
  cleanups.push(() => pool.close());
  return pool;
}

const open = (pool: SessionPool, model: ReturnType<typeof createScriptedModel>, options: Partial<TaskManagerOptions> = {}): TaskManager =>
  openManager(cleanups, pool, model, options);
const waitForStatus = (manager: TaskManager, id: string, status: TaskRecord['status']): Promise<TaskRecord> => waitFor(manager, me, id, status);

/** The results the model was given so far, by call id, as text. */
function resultsOf(call: ScriptedCall): Map<string, string> {
  const results = new Map<string, string>();
  for (const message of call.options.prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.type === 'tool-result') results.set(part.toolCallId, JSON.stringify(part.output));
  }
  return results;
}

/** Writes the notes `texts`, all in its first step; then says what each call answered. */
function writingModel(texts: readonly string[], system: string[] = []): ReturnType<typeof createScriptedModel> {
  return createScriptedModel({
    steps: (call) => {
      for (const message of call.options.prompt) if (message.role === 'system') system.push(message.content);
      const results = resultsOf(call);
      if (results.size === 0) {
        return { toolCalls: texts.map((text, index) => ({ toolCallId: `add-${index + 1}`, toolName: 'notes__add_note', args: { text } })) };
      }
      return { text: texts.map((_text, index) => `add-${index + 1}: ${results.get(`add-${index + 1}`) ?? 'no result'}`).join('\n') };
    },
  });
}

describe('a call that needs the caller’s approval', () => {
  it('waits as input_required with the call, and runs once approved', async () => {
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    const system: string[] = [];
    const manager = open(pool, writingModel(['disk full on db-3'], system), { defaults: { tools: { approval: ['notes__add_*'] } } });
    const task = await manager.start({ prompt: 'Record the finding' }, me);

    const waiting = await waitForStatus(manager, task.id, 'input_required');
    // The model was told which tool waits: its system prompt marks it.
    expect(system[0]).toContain('- notes__add_note (add_note) [each call waits for the caller’s approval]');
    expect(system[0]).toContain('- notes__list_notes (list_notes) [read-only]\n');
    expect(waiting.input).toMatchObject({
      kind: 'approval',
      toolCallId: 'add-1',
      call: { toolName: 'notes__add_note', input: { text: 'disk full on db-3' } },
      question: 'Approve the call of notes__add_note with {"text":"disk full on db-3"}?',
    });
    expect(notes).toEqual([]);
    await expect(manager.reply(task.id, me, { answer: 'yes' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('waits for a decision on notes__add_note'),
    });
    await manager.reply(task.id, me, { approve: true });

    const done = await waitForStatus(manager, task.id, 'completed');
    expect(notes).toEqual(['disk full on db-3']);
    expect(done.result?.finalText).toContain('added note 1');
    const log = await manager.logs(task.id, me);
    const types = log.entries.map((entry) => entry.type);
    expect(types).toContain('input-required');
    expect(log.entries.find((entry) => entry.type === 'input-answered')?.data).toMatchObject({ toolCallId: 'add-1', approved: true });
    // The approved call is in the log as any call: made once, answered once.
    expect(log.entries.filter((entry) => entry.type === 'tool-call')).toHaveLength(1);
    expect(log.entries.filter((entry) => entry.type === 'tool-result').map((entry) => entry.data)).toEqual([
      expect.objectContaining({ toolCallId: 'add-1', toolName: 'notes__add_note', isError: false, preview: 'added note 1' }),
    ]);
  });

  it('is never sent when denied: the model reads “denied by the caller” with the reason', async () => {
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    const manager = open(pool, writingModel(['restart db-3']), { defaults: { tools: { approval: ['notes__add_*'] } } });
    const task = await manager.start({ prompt: 'Record the finding' }, me);
    await waitForStatus(manager, task.id, 'input_required');
    await manager.reply(task.id, me, { approve: false, reason: 'not before the maintenance window' });

    const done = await waitForStatus(manager, task.id, 'completed');
    expect(notes).toEqual([]);
    expect(done.result?.finalText).toContain('Denied by the caller: not before the maintenance window. The call was not sent.');
    await expect(manager.reply(task.id, me, { approve: true })).rejects.toMatchObject({
      code: 'TASK_NOT_WAITING',
      message: expect.stringContaining('already decided'),
    });
  });

  it('asks for each call of a step in turn, and a caller adds approvals for its own task only', async () => {
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    const manager = open(pool, writingModel(['first', 'second']));
    // No approvals on the server: this task's caller asks for them.
    const task = await manager.start({ prompt: 'Record both', tools: { approval: ['notes__add_note'] } }, me);

    const first = await waitForStatus(manager, task.id, 'input_required');
    expect(first.input).toMatchObject({ toolCallId: 'add-1', call: { input: { text: 'first' } } });
    await manager.reply(task.id, me, { approve: true });
    const second = await vi.waitFor(
      async () => {
        const found = await manager.get(task.id, me);
        expect(found.input?.toolCallId).toBe('add-2');
        expect(found.status).toBe('input_required');
        return found;
      },
      { timeout: 10_000 },
    );
    // The first was sent when approved, before the second was asked about.
    expect(notes).toEqual(['first']);
    expect(second.input).toMatchObject({ kind: 'approval', call: { input: { text: 'second' } } });
    await manager.reply(task.id, me, { approve: false, reason: 'one is enough' });

    const done = await waitForStatus(manager, task.id, 'completed');
    expect(notes).toEqual(['first']);
    expect(done.result?.finalText).toMatch(/add-1: .*added note 1/);
    expect(done.result?.finalText).toMatch(/add-2: .*Denied by the caller: one is enough/);
    // One model call asked for both; one more read the outcomes.
    expect(done.usage.steps).toBe(2);
    // Both decisions stay on the record, oldest first: the history a caller reads (A2A's GetTask).
    expect(done.earlierInputs).toEqual([expect.objectContaining({ toolCallId: 'add-1', approved: true })]);
    expect(done.input).toMatchObject({ toolCallId: 'add-2', approved: false, reason: 'one is enough' });

    // Another task of the same manager, without the caller's approvals, writes at once.
    const other = await manager.start({ prompt: 'Record both' }, me);
    await waitForStatus(manager, other.id, 'completed');
    expect(notes).toEqual(['first', 'first', 'second']);
  });

  it('ends as INPUT_TIMEOUT when no decision came within inputTimeoutMs, naming the call, which was never sent', async () => {
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    let clock = Date.parse('2026-03-01T10:00:00Z');
    const manager = open(pool, writingModel(['late']), { now: () => clock, inputTimeoutMs: 1_000, defaults: { tools: { approval: ['notes__add_note'] } } });
    const task = await manager.start({ prompt: 'Record it' }, me);
    await waitForStatus(manager, task.id, 'input_required');
    clock += 1_001;
    const ended = await waitForStatus(manager, task.id, 'error');
    expect(ended.error).toEqual({
      code: 'INPUT_TIMEOUT',
      message: `Task ${task.id} waited for its caller's approval of notes__add_note and no decision came within 1000 ms (tasks.inputTimeoutMs)`,
    });
    expect(notes).toEqual([]);
  });

  it('is refused inside a program, and in a run without a caller to ask', async () => {
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    const program = `const wrote = await callTool('notes__add_note', { text: 'from code' }).then(() => 'wrote', (error) => String(error.message ?? error)); return wrote;`;
    const model = createScriptedModel({
      steps: (call) => {
        const results = resultsOf(call);
        if (results.size === 0) return { toolCalls: [{ toolCallId: 'code-1', toolName: CODE_TOOL_NAME, args: { code: program } }] };
        return { text: results.get('code-1') ?? 'no result' };
      },
    });
    const manager = open(pool, model, { defaults: { tools: { approval: ['notes__*'] } } });
    const task = await manager.start({ prompt: 'Write from code' }, me);
    const done = await waitForStatus(manager, task.id, 'completed');
    expect(notes).toEqual([]);
    expect(done.result?.finalText).toContain('needs the caller\'s approval (tools.approval \\"notes__*\\")');

    // A library's run has no caller: the call fails, naming the rule.
    const run = await runAgent({ pool, prompt: 'Record', model: writingModel(['x']), tools: { approval: ['notes__add_note'] } });
    expect(run.finishReason).toBe('stop');
    expect(run.finalText).toContain('needs the caller');
    expect(notes).toEqual([]);
  });

  it('survives a restart on SQLite while it waits: the call is approved after it, and sent once', async () => {
    const directory = mkdtempSync(path.join(tmpdir(), 'klym-approve-'));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const { notes, server } = notesUpstream();
    const pool = await openPool(server);
    const options = { defaults: { tools: { approval: ['notes__add_note'] } } };
    const firstStore = await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') });
    const first = createTaskManager({ pool, store: firstStore, run: (run) => runAgent({ ...run, model: writingModel(['after restart']) }), ...options });
    const task = await first.start({ prompt: 'Record it' }, me);
    await waitForStatus(first, task.id, 'input_required');
    await first.close({ graceMs: 0 });
    await firstStore.close();

    const store = await createSqliteTaskStore({ path: path.join(directory, 'tasks.db') });
    cleanups.push(() => store.close());
    const second = open(pool, writingModel(['after restart']), { store, ...options });
    expect((await second.get(task.id, me)).input).toMatchObject({ kind: 'approval', call: { toolName: 'notes__add_note' } });
    await second.reply(task.id, me, { approve: true });
    const done = await waitForStatus(second, task.id, 'completed');
    expect(notes).toEqual(['after restart']);
    expect(done.result?.finalText).toContain('added note 1');
  });
});

/** grynya's `add_node`, as far as the write-back uses it: it keeps the nodes it was sent. */
function graph(): { nodes: unknown[]; server: () => McpServer } {
  const nodes: unknown[] = [];
  const server = (): McpServer => {
    const mcp = new McpServer({ name: 'grynya', version: '1.0.0' });
    mcp.registerTool(
      'add_node',
      { inputSchema: { node_type: z.string(), node_data: z.record(z.string(), z.unknown()), day_id: z.string(), time: z.string() } },
      (args) => {
        nodes.push(args);
        return { content: [{ type: 'text', text: JSON.stringify({ status: 'success' }) }] };
      },
    );
    return mcp;
  };
  return { nodes, server };
}
const answering = () => createScriptedModel({ steps: () => ({ text: 'db-3 ran out of disk at 02:14' }) });

describe('the write-back of a result, when add_node needs approval', () => {
  it('waits with the result kept; approved, the node is written; denied, it is not, and the task says why', async () => {
    const { nodes, server } = graph();
    const pool = await createSessionPool({ upstreams: { grynya: createInMemoryUpstream(server) } });
    cleanups.push(() => pool.close());
    const manager = open(pool, answering(), { defaults: { tools: { approval: ['grynya__add_node'] } }, writeBack: { byDefault: true } });

    const approved = await manager.start({ prompt: 'Why did db-3 stop?' }, me);
    const waiting = await waitForStatus(manager, approved.id, 'input_required');
    expect(waiting.input).toMatchObject({
      kind: 'approval',
      toolCallId: 'write-back',
      call: { toolName: 'grynya__add_node', input: { node_id: `klym_${approved.id}` } },
    });
    expect(waiting.input?.question).toContain('into the graph');
    // The answer is there while the write waits.
    expect(waiting.result?.finalText).toBe('db-3 ran out of disk at 02:14');
    expect(nodes).toEqual([]);
    await manager.reply(approved.id, me, { approve: true });
    const written = await vi.waitFor(
      async () => {
        const found = await manager.get(approved.id, me);
        expect(found.writeBack?.status).toBe('written');
        return found;
      },
      { timeout: 10_000 },
    );
    expect(written.status).toBe('completed');
    expect(nodes).toEqual([
      expect.objectContaining({
        node_type: 'Analysis',
        node_data: expect.objectContaining({ id: `klym_${approved.id}`, full_text: 'db-3 ran out of disk at 02:14' }),
      }),
    ]);

    const denied = await manager.start({ prompt: 'Why did db-3 stop?' }, me);
    await waitForStatus(manager, denied.id, 'input_required');
    await manager.reply(denied.id, me, { approve: false, reason: 'draft only' });
    const done = await waitForStatus(manager, denied.id, 'completed');
    expect(done.result?.finalText).toBe('db-3 ran out of disk at 02:14');
    expect(done.writeBack).toMatchObject({ status: 'failed', error: 'Denied by the caller: draft only. The result was not written.' });
    expect(nodes).toHaveLength(1);

    // A task that does not record its result never waits.
    const unrecorded = await manager.start({ prompt: 'Why?', recordResult: false }, me);
    expect((await waitForStatus(manager, unrecorded.id, 'completed')).writeBack).toBeUndefined();
  });
});
