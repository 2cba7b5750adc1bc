import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { ModelMessage } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  artifactOf,
  checkpointOf as checkpoint,
  finishedTaskRecord,
  taskRecord as task,
  userMessage,
  webhookMessage,
} from '../../../../../../test/support/task-fixtures.ts';
import type { AgentCheckpoint } from '../../../agent/types.ts';
import { KlymError } from '../../../errors.ts';
import { migrateSchema, TASK_STORE_SCHEMA_VERSION } from './schema.ts';
import { createSqliteTaskStore } from './sqlite-task-store.ts';
import { logEntryJson } from '../task-log.ts';
import type { TaskStore } from '../task-types.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'klym-sqlite-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const storeModule = new URL('./sqlite-task-store.ts', import.meta.url).href;

/** Runs `script` (an ES module that may use `createSqliteTaskStore`) in a child `node` process. */
function spawnNode(script: string): ChildProcess & { stderrText: () => string } {
  const child = spawn(process.execPath, ['--input-type=module', '-e', `import { createSqliteTaskStore } from ${JSON.stringify(storeModule)};\n${script}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return Object.assign(child, { stderrText: () => stderr });
}

/** Resolves once the child printed `line`; rejects if it exits first. */
function printed(child: ChildProcess & { stderrText: () => string }, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes(line)) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`the child exited (${code ?? signal}) before printing ${line}: ${child.stderrText()}`)));
  });
}

async function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  return { code: child.exitCode, signal: child.signalCode };
}

async function openFails(path: string): Promise<KlymError> {
  const error = await createSqliteTaskStore({ path }).then(
    async (store) => {
      await store.close();
      throw new Error(`expected ${path} to be refused`);
    },
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(KlymError);
  expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE' });
  const { message } = error as KlymError;
  expect(message).toContain(path);
  expect(message).not.toContain('\n');
  return error as KlymError;
}

// What every store must do is test/support/task-store-contract.ts's, run on SQLite by
// sqlite-task-store.contract.test.ts; here, what is SQLite's own: the file, batching, reopening.
describe('createSqliteTaskStore: the TaskStore contract', () => {
  it('keeps every field of a task across close and reopen', async () => {
    const path = join(dir, 'tasks.db');
    const done = finishedTaskRecord('t1');
    {
      await using store = await createSqliteTaskStore({ path });
      expect(await store.insert(done)).toEqual(done);
      expect(await store.get('t1')).toEqual(done);
      expect(await store.get('missing')).toBeUndefined();
    }
    await using reopened = await createSqliteTaskStore({ path });
    expect(await reopened.get('t1')).toEqual(done);
  });
});

describe('createSqliteTaskStore: logs', () => {
  it('keeps entries that fill the bound exactly, whether they were written in one batch or one by one', async () => {
    // Entries 1 to 9 with data { step: 1 } to { step: 9 } all take the same bytes.
    const size = Buffer.byteLength(logEntryJson(1, new Date().toISOString(), 'step-start', '{"step":1}'));
    await using store = await createSqliteTaskStore({ path: join(dir, 'tasks.db'), log: { maxBytes: 3 * size } });
    await store.insert(task('batched'));
    await store.insert(task('ticked'));
    for (let n = 1; n <= 6; n++) store.appendLog('batched', 'step-start', { step: n });
    for (let n = 1; n <= 6; n++) {
      store.appendLog('ticked', 'step-start', { step: n });
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const id of ['batched', 'ticked']) {
      expect(await store.readLog(id)).toMatchObject({ entries: [{ seq: 4 }, { seq: 5 }, { seq: 6 }], dropped: 3, droppedBefore: { fromSeq: 1, toSeq: 3 } });
    }
  });

  it('reads an entry of a type it does not write as an unknown entry, keeping what was stored', async () => {
    const path = join(dir, 'tasks.db');
    {
      await using store = await createSqliteTaskStore({ path });
      await store.insert(task('t1'));
      store.appendLog('t1', 'step-start', { step: 1 });
      store.appendLog('t1', 'step-start', { step: 2 });
    }
    // As another version of Klym might have written them.
    const db = new DatabaseSync(path);
    db.prepare("UPDATE task_logs SET type = 'note' WHERE seq = 1").run();
    db.prepare("UPDATE task_logs SET data = '[2]' WHERE seq = 2").run();
    db.close();
    await using store = await createSqliteTaskStore({ path });
    expect((await store.readLog('t1')).entries).toMatchObject([
      { seq: 1, type: 'unknown-entry', data: { storedType: 'note', storedData: { step: 1 } } },
      { seq: 2, type: 'unknown-entry', data: { storedType: 'step-start', storedData: [2] } },
    ]);
  });
});

describe('createSqliteTaskStore: checkpoints', () => {
  it('round-trips a checkpoint through close and reopen', async () => {
    const path = join(dir, 'tasks.db');
    const saved: AgentCheckpoint = {
      ...checkpoint(
        [userMessage('hi'), { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'grynya__query', input: { q: 1 } }] }],
        1,
      ),
      current: { step: 2, text: 'thinking', calls: [{ toolCallId: 'c2', toolName: 'grynya__query', input: { q: 2 } }] },
    };
    {
      await using store = await createSqliteTaskStore({ path });
      await store.insert(task('t1', { status: 'running' }));
      expect(await store.loadCheckpoint('t1')).toBeUndefined();
      store.saveCheckpoint('t1', saved);
      expect(await store.loadCheckpoint('t1')).toEqual(saved);
    }
    await using reopened = await createSqliteTaskStore({ path });
    expect(await reopened.loadCheckpoint('t1')).toEqual(saved);
  });

  it('writes only the messages a save adds, and rewrites from the first one that changed', async () => {
    await using store = await createSqliteTaskStore({ path: join(dir, 'tasks.db') });
    await store.insert(task('t1', { status: 'running' }));
    const serialized = new Map<string, number>();
    // A message that counts how often it is written.
    const counted = (text: string): ModelMessage =>
      ({ role: 'user', content: text, toJSON: () => (serialized.set(text, (serialized.get(text) ?? 0) + 1), { role: 'user', content: text }) }) as ModelMessage;
    const [m1, m2, m3] = [counted('m1'), counted('m2'), counted('m3')];
    store.saveCheckpoint('t1', checkpoint([m1, m2]));
    store.saveCheckpoint('t1', checkpoint([m1, m2, m3]));
    store.saveCheckpoint('t1', checkpoint([m1, m2, m3], 4));
    expect(Object.fromEntries(serialized)).toEqual({ m1: 1, m2: 1, m3: 1 });
    expect(await store.loadCheckpoint('t1')).toEqual(checkpoint([userMessage('m1'), userMessage('m2'), userMessage('m3')], 4));

    // Shorter: what is stored past it goes.
    store.saveCheckpoint('t1', checkpoint([m1]));
    expect((await store.loadCheckpoint('t1'))?.messages).toEqual([userMessage('m1')]);
    // An earlier message replaced (a resumed run drops an interrupted call): rewritten from there.
    store.saveCheckpoint('t1', checkpoint([m1, m2, m3]));
    store.saveCheckpoint('t1', checkpoint([m1, userMessage('m2 again'), m3]));
    expect((await store.loadCheckpoint('t1'))?.messages).toEqual([userMessage('m1'), userMessage('m2 again'), userMessage('m3')]);
    expect(serialized.get('m1')).toBe(1);
  });

  it('continues a checkpoint loaded after a restart', async () => {
    const path = join(dir, 'tasks.db');
    {
      await using store = await createSqliteTaskStore({ path });
      await store.insert(task('t1', { status: 'running' }));
      store.saveCheckpoint('t1', checkpoint([userMessage('m1'), userMessage('m2')]));
    }
    await using store = await createSqliteTaskStore({ path });
    const loaded = await store.loadCheckpoint('t1');
    const next = checkpoint([...(loaded?.messages ?? []), userMessage('m3')]);
    store.saveCheckpoint('t1', next);
    expect(await store.loadCheckpoint('t1')).toEqual(next);
  });

  it('refuses a checkpoint of a task it does not keep, and keeps the buffered log', async () => {
    await using store = await createSqliteTaskStore({ path: join(dir, 'tasks.db') });
    await store.insert(task('t1'));
    store.appendLog('t1', 'step-start', { step: 1 });
    expect(() => store.saveCheckpoint('missing', checkpoint([]))).toThrow(expect.objectContaining({ code: 'TASK_NOT_FOUND' }));
    expect((await store.readLog('t1')).entries.map((entry) => entry.data)).toEqual([{ step: 1 }]);
  });
});

describe('createSqliteTaskStore: the file', () => {
  it('creates the missing directories of its path', async () => {
    const path = join(dir, 'a', 'b', 'tasks.db');
    await using store = await createSqliteTaskStore({ path });
    await store.insert(task('t1'));
    expect((await readFile(path)).subarray(0, 15).toString()).toBe('SQLite format 3');
  });

  it('migrates a version 1 file, keeping its tasks and logs, and then has idempotency, checkpoints and a durable webhook outbox', async () => {
    const path = join(dir, 'v1.db');
    const old = task('t1', {
      status: 'completed',
      finishedAt: '2026-01-01T00:00:05.000Z',
      result: { text: 'ok', finalText: 'ok', finishReason: 'stop', model: 'scripted', toolCalls: 0 },
    });
    const v1 = new DatabaseSync(path);
    migrateSchema(v1, 1);
    v1.prepare(
      'INSERT INTO tasks (id, principal, status, created_at, finished_at, record, log_first_seq, log_last_seq, log_bytes) VALUES (?, ?, ?, ?, ?, ?, 3, 4, ?)',
    ).run(old.id, old.principal, old.status, old.createdAt, old.finishedAt ?? null, JSON.stringify(old), 0);
    let bytes = 0;
    for (const seq of [3, 4]) {
      const json = JSON.stringify({ step: seq });
      const size = Buffer.byteLength(logEntryJson(seq, '2026-01-01T00:00:0.000Z', 'step-start', json));
      bytes += size;
      v1.prepare('INSERT INTO task_logs (task_id, seq, time, type, data, bytes) VALUES (?, ?, ?, ?, ?, ?)').run(
        't1',
        seq,
        '2026-01-01T00:00:0.000Z',
        'step-start',
        json,
        size,
      );
    }
    v1.prepare('UPDATE tasks SET log_bytes = ?').run(bytes);
    expect(v1.prepare('PRAGMA user_version').get()).toEqual({ user_version: 1 });
    v1.close();

    {
      await using store = await createSqliteTaskStore({ path });
      expect(await store.get('t1')).toEqual(old);
      expect(await store.counts()).toMatchObject({ completed: 1 });
      expect(await store.readLog('t1')).toMatchObject({
        entries: [
          { seq: 3, data: { step: 3 } },
          { seq: 4, data: { step: 4 } },
        ],
        dropped: 2,
        droppedBefore: { fromSeq: 1, toSeq: 2 },
        lastSeq: 4,
      });
      store.appendLog('t1', 'step-start', { step: 5 });
      expect((await store.tailLog('t1', 1)).entries[0]?.seq).toBe(5);
      const keyed = await store.insert(task('t2', { status: 'running', request: { prompt: 'b', idempotencyKey: 'k' } }));
      expect(await store.insert(task('t3', { request: { prompt: 'c', idempotencyKey: 'k' } }))).toEqual(keyed);
      store.saveCheckpoint('t2', checkpoint([userMessage('m1')]));
      expect(await store.loadCheckpoint('t2')).toEqual(checkpoint([userMessage('m1')]));
      await store.addWebhookMessages([webhookMessage('m1')]);
    }
    {
      // The webhook outbox (version 3) kept what was stored before the file was closed.
      await using store = await createSqliteTaskStore({ path });
      expect(await store.claimWebhookMessages(2_000, 1_000, 10)).toMatchObject([webhookMessage('m1')]);
    }
    const migrated = new DatabaseSync(path);
    expect(migrated.prepare('PRAGMA user_version').get()).toEqual({ user_version: TASK_STORE_SCHEMA_VERSION });
    migrated.close();
  });

  it('migrates a version 4 file: its artifacts read as text, count against the caps, and records are kept beside them', async () => {
    const path = join(dir, 'v4.db');
    const running = task('t1', { status: 'running' });
    const old = artifactOf('art_00000000000a', 'line one\nline two é', { createdAt: '2026-01-01T00:00:01.000Z' });
    const v4 = new DatabaseSync(path);
    migrateSchema(v4, 4);
    v4.prepare('INSERT INTO tasks (id, principal, status, created_at, record) VALUES (?, ?, ?, ?, ?)').run(
      running.id,
      running.principal,
      running.status,
      running.createdAt,
      JSON.stringify(running),
    );
    v4.prepare('INSERT INTO artifacts (task_id, id, tool, bytes, lines, tokens, created_at, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      't1',
      old.id,
      old.tool,
      old.bytes,
      old.lines,
      old.tokens,
      old.createdAt,
      old.text,
    );
    v4.close();

    const original = '[{"a": 1}]';
    const records = { count: 1, firstLine: 0, path: [], keys: ['a'], originalBytes: Buffer.byteLength(original) };
    const json = artifactOf('art_00000000000b', '{"a":1}', { createdAt: '2026-01-01T00:00:02.000Z', records, original });
    {
      await using store = await createSqliteTaskStore({ path, artifacts: { maxBytesPerTask: old.bytes + json.bytes + records.originalBytes } });
      expect(await store.loadArtifact('t1', old.id)).toEqual(old);
      const { text: _text, ...info } = old;
      expect(await store.listArtifacts('t1')).toEqual([info]);
      expect(await store.artifactBytes()).toBe(old.bytes);
      await store.saveArtifact('t1', json);
      // The old artifact counts: the task is now at its cap.
      await expect(store.saveArtifact('t1', artifactOf('art_00000000000c', 'x'))).rejects.toMatchObject({ code: 'ARTIFACT_LIMIT' });
    }
    await using reopened = await createSqliteTaskStore({ path });
    expect(await reopened.loadArtifact('t1', json.id)).toEqual(json);
    expect((await reopened.listArtifacts('t1')).map((one) => one.records)).toEqual([undefined, records]);
  });

  it('lists and sums artifacts without reading their texts', async () => {
    const path = join(dir, 'tasks.db');
    await (await createSqliteTaskStore({ path })).close();
    const db = new DatabaseSync(path);
    // SQLite reaches a column past a big text only through the text's overflow pages.
    const columns = (db.prepare('PRAGMA table_info(artifacts)').all() as { name: string }[]).map((column) => column.name);
    const plan = (sql: string): string => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((row) => row.detail).join('; ');
    const sums = [plan('SELECT coalesce(sum(kept_bytes), 0) FROM artifacts'), plan("SELECT coalesce(sum(kept_bytes), 0) FROM artifacts WHERE task_id = 't1'")];
    db.close();
    expect(columns.slice(columns.indexOf('text'))).toEqual(['text', 'original']);
    expect(sums).toEqual([expect.stringMatching(/COVERING INDEX artifacts_by_task/), expect.stringMatching(/COVERING INDEX artifacts_by_task/)]);
  });

  it('refuses a file written by a newer Klym', async () => {
    const path = join(dir, 'tasks.db');
    await (await createSqliteTaskStore({ path })).close();
    const db = new DatabaseSync(path);
    db.exec(`PRAGMA user_version = ${TASK_STORE_SCHEMA_VERSION + 1}`);
    db.close();
    const error = await openFails(path);
    expect(error.message).toContain(
      `written by a newer Klym, schema version ${TASK_STORE_SCHEMA_VERSION + 1}; this Klym knows up to ${TASK_STORE_SCHEMA_VERSION}`,
    );
  });

  it('refuses, in one line and without changing it, a file that is not a Klym database', async () => {
    const text = join(dir, 'notes.txt');
    await writeFile(text, 'These are my notes, not a database.\n'.repeat(20));
    expect((await openFails(text)).message).toMatch(/not a Klym database \(not a SQLite file/);
    expect(await readFile(text, 'utf8')).toBe('These are my notes, not a database.\n'.repeat(20));

    const random = join(dir, 'random.bin');
    await writeFile(random, Buffer.from(Array.from({ length: 8_192 }, (_, index) => (index * 7919 + 13) % 251)));
    expect((await openFails(random)).message).toMatch(/not a Klym database/);

    const other = join(dir, 'other.db');
    const foreign = new DatabaseSync(other);
    foreign.exec("CREATE TABLE tasks (id TEXT); INSERT INTO tasks VALUES ('theirs')");
    foreign.close();
    const before = await readFile(other);
    expect((await openFails(other)).message).toMatch(/not a Klym database \(a SQLite database of another application/);
    expect(await readFile(other)).toEqual(before);

    const marked = join(dir, 'marked.db');
    const withId = new DatabaseSync(marked);
    withId.exec('PRAGMA application_id = 1234');
    withId.close();
    expect((await openFails(marked)).message).toMatch(/another application, application_id 0x4d2/);
  });

  it('refuses a path that cannot hold a database', async () => {
    const directory = join(dir, 'a-directory');
    await mkdir(directory);
    expect((await openFails(directory)).message).toMatch(/is a directory/);
    const file = join(dir, 'a-file');
    await writeFile(file, '');
    expect((await openFails(join(file, 'tasks.db'))).message).toMatch(/directory .*a-file cannot be created/);
  });

  it('serves one store at a time in a process, until it is closed', async () => {
    const path = join(dir, 'tasks.db');
    const first = await createSqliteTaskStore({ path });
    expect((await openFails(path)).message).toMatch(/locked by another Klym process/);
    await first.close();
    await using second = await createSqliteTaskStore({ path });
    expect(await second.counts()).toMatchObject({ pending: 0 });
  });

  it('is locked while another process has it open, and free once that process is killed', async () => {
    const path = join(dir, 'tasks.db');
    const child = spawnNode(`
      const store = await createSqliteTaskStore({ path: ${JSON.stringify(path)} });
      await store.insert({ id: 'theirs', principal: 'p', request: { prompt: 'x' }, status: 'running', createdAt: new Date().toISOString(), currentStep: 's', usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0 } });
      console.log('ready');
      setInterval(() => {}, 60_000);
    `);
    try {
      await printed(child, 'ready');
      expect((await openFails(path)).message).toMatch(/locked by another Klym process/);
    } finally {
      child.kill('SIGKILL');
    }
    expect(await exited(child)).toEqual({ code: null, signal: 'SIGKILL' });
    await using store = await createSqliteTaskStore({ path });
    expect((await store.get('theirs'))?.status).toBe('running');
  });

  it('keeps what was written before the process was SIGKILLed: ticks, full batches and checkpoints', async () => {
    const path = join(dir, 'tasks.db');
    const child = spawnNode(`
      const store = await createSqliteTaskStore({ path: ${JSON.stringify(path)}, batchEntries: 3 });
      await store.insert({ id: 't1', principal: 'p', request: { prompt: 'x' }, status: 'running', createdAt: new Date().toISOString(), currentStep: 's', usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0 } });
      store.appendLog('t1', 'task-start', { model: 'ticked 1' });
      await new Promise((resolve) => setImmediate(resolve));
      store.saveCheckpoint('t1', { steps: 1, messages: [{ role: 'user', content: 'x' }], texts: [], usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2, estimated: false }, elapsedMs: 5, toolCalls: 0 });
      store.appendLog('t1', 'task-start', { model: 'batched 2' });
      store.appendLog('t1', 'task-start', { model: 'batched 3' });
      store.appendLog('t1', 'task-start', { model: 'batched 4' });
      store.appendLog('t1', 'task-start', { model: 'buffered 5' });
      process.kill(process.pid, 'SIGKILL');
    `);
    expect(await exited(child)).toEqual({ code: null, signal: 'SIGKILL' });
    await using store = await createSqliteTaskStore({ path });
    expect((await store.get('t1'))?.status).toBe('running');
    // The last entry was only buffered when the process died: appendLog never waits for the disk.
    expect((await store.readLog('t1')).entries.map((entry) => entry.data)).toEqual([
      { model: 'ticked 1' },
      { model: 'batched 2' },
      { model: 'batched 3' },
      { model: 'batched 4' },
    ]);
    expect(await store.loadCheckpoint('t1')).toMatchObject({ steps: 1, messages: [{ role: 'user', content: 'x' }], elapsedMs: 5 });
  });
});

describe('createSqliteTaskStore: closing', () => {
  it('writes what is buffered, and is idempotent', async () => {
    const path = join(dir, 'tasks.db');
    const store = await createSqliteTaskStore({ path });
    await store.insert(task('t1'));
    store.appendLog('t1', 'task-start', { model: 'last words' });
    const closing = store.close();
    expect(store.close()).toBe(closing);
    await closing;
    await store[Symbol.asyncDispose]();
    await using reopened = await createSqliteTaskStore({ path });
    expect((await reopened.readLog('t1')).entries.map((entry) => entry.data)).toEqual([{ model: 'last words' }]);
  });

  it('refuses every call after close but a late log entry, which it ignores', async () => {
    const store: TaskStore = await createSqliteTaskStore({ path: join(dir, 'tasks.db') });
    await store.insert(task('t1'));
    await store.close();
    const closed = { code: 'STORE_UNAVAILABLE', message: expect.stringMatching(/tasks\.db is closed/) };
    await expect(store.get('t1')).rejects.toMatchObject(closed);
    await expect(store.list()).rejects.toMatchObject(closed);
    await expect(store.readLog('t1')).rejects.toMatchObject(closed);
    await expect(store.transition('t1', ['pending'], { status: 'running' })).rejects.toMatchObject(closed);
    expect(() => store.saveCheckpoint('t1', checkpoint([]))).toThrow(expect.objectContaining(closed));
    expect(() => store.appendLog('t1', 'task-start', { model: 'late' })).not.toThrow();
  });

  it('checks its options', async () => {
    await expect(createSqliteTaskStore({ path: join(dir, 'tasks.db'), batchEntries: 0 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected `batchEntries` to be a positive integer, got 0',
    });
    await expect(createSqliteTaskStore({ path: '' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(createSqliteTaskStore({ path: join(dir, 'tasks.db'), artifacts: { maxBytes: 1.5 } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'Expected `artifacts.maxBytes` to be a positive integer, got 1.5',
    });
  });
});
