// Issue #41: a program interrupted by a crash runs again from its start when its run resumes, its recorded host calls
// answered from the checkpoint: a write made before the crash is not made again (the program gets its recorded
// result), and a write sent whose outcome was never recorded fails with an error saying so. In process (a checkpoint
// taken mid-program, as a crash leaves it), and with a real `klym serve` SIGKILLed mid-program and started again.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { runAgent, type AgentCheckpoint, type AgentEvent } from '@klym/core';
import { createFakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { startFakeLlmServer, type FakeRequest } from './support/fake-llm-server.ts';
import { grynyaPool } from './support/grynya-pool.ts';
import { programmer } from './support/programmer.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/** Reads, one write, then reads: the write's answer and how many reads came after it. */
const PROGRAM = `
await callTool('grynya__query_graph', { query: "MATCH (n:Service) RETURN n" });
let written;
try { const added = await callTool('grynya__add_node', { node_type: 'Note', node_data: { id: 'finding-1', text: 'svc-7 is down' } }); written = added.text.includes('finding-1') ? 'finding-1' : added.text }
catch (error) { written = 'failed: ' + error.message }
let reads = 0;
for (let i = 0; i < 12; i++) { await callTool('grynya__query_graph', { query: 'RETURN ' + i }); reads++; }
return 'written=' + written + ' reads=' + reads;`;

const isCodeResult = (request: FakeRequest): boolean => /written=\S+ reads=\d+/.test(request.body);

type Program = NonNullable<AgentCheckpoint['current']>['calls'][number];
const programOf = (checkpoint: AgentCheckpoint): Program | undefined => checkpoint.current?.calls.find((call) => call.toolName === 'klym__run_code');

/** A run of {@link PROGRAM} cancelled at its sixth host call, and the last checkpoint `pick` takes from before its program answered: what a crash then would have left. */
async function interrupted(pick: (program: Program) => boolean) {
  const { grynya, pool } = await grynyaPool(cleanups);
  const saved: AgentCheckpoint[] = [];
  const controller = new AbortController();
  await runAgent({
    pool,
    prompt: 'diagnose',
    model: programmer(PROGRAM).model,
    readOnlyTools: ['grynya__query_graph'],
    signal: controller.signal,
    // Copies, as a store keeps them: the run goes on changing its own.
    onCheckpoint: (checkpoint) => void saved.push(JSON.parse(JSON.stringify(checkpoint)) as AgentCheckpoint),
    onEvent: (event) => {
      if (event.type === 'code-call' && event.call === 6) controller.abort();
    },
  });
  // The checkpoint a crash at that moment would have left: the program under way, its result not recorded.
  const checkpoint = saved.findLast((candidate) => {
    const program = programOf(candidate);
    return program !== undefined && program.output === undefined && pick(program);
  });
  expect(checkpoint).toBeDefined();
  return { grynya, pool, checkpoint: checkpoint as AgentCheckpoint };
}

describe('a program interrupted by a crash, resumed (in process)', () => {
  it('runs the program again from its start, its write answered from the record and not made again', async () => {
    const { grynya, pool, checkpoint } = await interrupted(() => true);
    expect(grynya.stats.calls.add_node).toBe(1);
    expect(programOf(checkpoint)?.hostCalls?.find((call) => call.call === 2)).toMatchObject({
      name: 'callTool',
      target: 'grynya__add_node',
      outcome: { value: {} },
    });
    const events: AgentEvent[] = [];
    const run = await runAgent({
      pool,
      prompt: 'diagnose',
      model: programmer(PROGRAM).model,
      readOnlyTools: ['grynya__query_graph'],
      resume: checkpoint,
      onEvent: (event) => void events.push(event),
    });
    expect(grynya.stats.calls.add_node).toBe(1);
    expect(run.finalText).toBe('text: written=finding-1 reads=12');
    expect(events.find((event) => event.type === 'code-start')).toMatchObject({ replay: true });
    const calls = events.flatMap((event) => (event.type === 'code-call' ? [event] : []));
    // The calls the checkpoint holds with their outcome are replayed (the write's among them); the rest are made.
    const recorded = new Set(programOf(checkpoint)?.hostCalls?.flatMap((call) => (call.outcome === undefined ? [] : [call.call])));
    expect(recorded.has(2)).toBe(true);
    expect(calls.map((call) => [call.call, call.replayed === true])).toEqual(calls.map((call) => [call.call, recorded.has(call.call)]));
    expect(calls).toHaveLength(14);
  });

  it('gives the program an error saying so for a write sent whose outcome was never recorded, and does not send it again', async () => {
    // The checkpoint taken right before the write went: recorded as sent, no outcome.
    const { grynya, pool, checkpoint } = await interrupted((program) => {
      const write = program.hostCalls?.find((call) => call.target === 'grynya__add_node');
      return write !== undefined && write.outcome === undefined;
    });
    expect(grynya.stats.calls.add_node).toBe(1);
    const run = await runAgent({ pool, prompt: 'diagnose', model: programmer(PROGRAM).model, readOnlyTools: ['grynya__query_graph'], resume: checkpoint });
    expect(grynya.stats.calls.add_node).toBe(1);
    expect(run.finalText).toBe(
      'text: written=failed: This call was sent before a restart of Klym interrupted the program, and its result was not recorded: its outcome is unknown, it may or may not have taken effect. Klym did not send it again; check before calling it again. reads=12',
    );
  });
});

describe('a real klym serve SIGKILLed mid-program', () => {
  it('resumes the task, runs the program again, and the fake grynya sees one write', async () => {
    const TOKEN = 'token-of-grynya-0123456789';
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const llm = await startFakeLlmServer((request) => {
      if (!isCodeResult(request)) return { kind: 'turn', toolCalls: [{ name: 'klym__run_code', args: { code: PROGRAM } }] };
      return { kind: 'turn', text: `program answered ${/written=\S+ reads=\d+/.exec(request.body)?.[0] ?? ''}` };
    });
    cleanups.push(() => llm.close());
    const config = {
      upstreams: { grynya: { url: grynya.mcpUrl, tools: { readOnlyTools: ['query_graph'] } } },
      llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
      tasks: { store: 'sqlite:state/tasks.db' },
      server: { port: 0, tokens: { grynya: TOKEN } },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));

    grynya.faults.delayMs = 100;
    const first = await serveKlym(directory.path, cleanups);
    const id = String((await restCall(first.url, '/api/tasks', TOKEN, { prompt: 'Diagnose and record the finding.' })).json.task_id);
    // The write is made and answered, and reads after it: its result is in the task's record.
    await vi.waitFor(() => expect(grynya.stats.calls.query_graph ?? 0).toBeGreaterThanOrEqual(5), { timeout: 60_000 });
    expect(grynya.stats.calls.add_node).toBe(1);
    first.klym.child.kill('SIGKILL');
    expect((await first.klym.exited()).signal).toBe('SIGKILL');

    grynya.faults.delayMs = 0;
    const second = await serveKlym(directory.path, cleanups);
    await vi.waitFor(async () => expect(((await restCall(second.url, `/api/tasks/${id}`, TOKEN)).json as { status: string }).status).toBe('completed'), {
      timeout: 60_000,
    });
    const after = (await restCall(second.url, `/api/tasks/${id}?full_result=true`, TOKEN)).json as { result: string; resumed_from?: number[] };
    expect(after.resumed_from?.length).toBe(1);
    expect(grynya.stats.calls.add_node).toBe(1);
    expect(after.result).toBe('program answered written=finding-1 reads=12');
    // The model was asked once for the program and once with its result: the resume did not ask for it again.
    expect(llm.requests.filter(isCodeResult)).toHaveLength(1);
    second.klym.child.kill('SIGTERM');
    expect((await second.klym.exited()).code).toBe(0);
  }, 120_000);
});
