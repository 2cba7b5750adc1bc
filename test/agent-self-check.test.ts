import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, runAgent, SELF_CHECK_OK, type AgentEvent } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { toolStepThenAnswer } from './support/agent-events.ts';
import { packageFile } from './support/upstream-servers.ts';

let directory: string;
const grynyas: FakeGrynya[] = [];
beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'klym-self-check-'));
});
afterAll(() => rm(directory, { recursive: true, force: true }));
afterEach(async () => {
  await Promise.all(grynyas.splice(0).map((grynya) => grynya.close()));
});

async function startGrynya(): Promise<FakeGrynya> {
  const grynya = await createFakeGrynya({ allowedHosts: ['localhost'] });
  grynyas.push(grynya);
  return grynya;
}

const grynyaUpstream = (grynya: FakeGrynya) => ({ url: grynya.sseUrl, transport: 'sse' as const, headers: { Host: 'localhost' } });
const memoryUpstream = (file: string) => ({
  command: process.execPath,
  args: [packageFile('@modelcontextprotocol/server-memory', 'dist/index.js')],
  env: { MEMORY_FILE_PATH: path.join(directory, file) },
});

describe('the scripted model: the default self-check', () => {
  it('over the fake grynya (SSE): lists the tools, probes query_graph with RETURN 1, and says all is well', async () => {
    const grynya = await startGrynya();
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya) } });
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Check yourself', onEvent: (event) => events.push(event) });

    expect(run.model).toBe('scripted');
    expect(run.finishReason).toBe('stop');
    expect(run.text).toContain(`${SELF_CHECK_OK}.`);
    expect(run.text).toMatch(/- grynya: 5 tools listed, 5 available to this run; probe grynya__query_graph \{"query":"RETURN 1"\} → ok: \{"status": "success"/);
    expect(run.steps).toBe(2);
    expect(grynya.stats.calls.query_graph).toBe(1);
    // The scripted model reports no usage: the run estimates it, and says so; it costs nothing.
    expect(run.usage).toMatchObject({ estimated: true });
    expect(run.usage.totalTokens).toBeGreaterThan(0);
    expect(run.costUsd).toBe(0);
    expect(events.map((event) => event.type)).toEqual(toolStepThenAnswer());
  });

  it('over server-memory (stdio) and the fake grynya together: probes read_graph and query_graph', async () => {
    const grynya = await startGrynya();
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya), memory: memoryUpstream('both.jsonl') } });

    const run = await runAgent({ pool, prompt: 'Check yourself' });

    expect(run.text.startsWith(`${SELF_CHECK_OK}.`)).toBe(true);
    expect(run.text).toMatch(/- memory: 9 tools listed, 9 available to this run; probe memory__read_graph \{\} → ok: /);
    expect(run.text).toContain('- grynya: 5 tools listed');
    expect(run.toolCalls.map((call) => call.toolName).toSorted()).toEqual(['grynya__query_graph', 'memory__read_graph']);
  });

  it('with the database disconnected, does not claim all is well, and names the failed probe', async () => {
    const grynya = await startGrynya();
    grynya.faults.dbDisconnected = true;
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya), memory: memoryUpstream('db-down.jsonl') } });

    const run = await runAgent({ pool, prompt: 'Check yourself' });

    expect(run.text).not.toContain(SELF_CHECK_OK);
    expect(run.text).toMatch(/^Self-check failed: grynya's probe failed: FalkorDB is not connected\./);
    // The upstream that works is still reported as working.
    expect(run.text).toMatch(/- memory: .* → ok: /);
  });

  it('continuing an earlier conversation probes again instead of reusing the old probe results', async () => {
    const grynya = await startGrynya();
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya) } });
    const first = await runAgent({ pool, prompt: 'Check yourself' });
    expect(first.text).toContain(SELF_CHECK_OK);
    grynya.faults.dbDisconnected = true;

    const again = await runAgent({ pool, prompt: 'Check yourself again', messages: first.messages });

    expect(grynya.stats.calls.query_graph).toBe(2);
    expect(again.text).not.toContain(SELF_CHECK_OK);
    expect(again.text).toMatch(/^Self-check failed: grynya's probe failed: FalkorDB is not connected\./);
  });

  it('names an upstream that is down as unavailable instead of leaving it out', async () => {
    const grynya = await startGrynya();
    const url = grynya.sseUrl;
    await grynya.close();
    await using pool = await createSessionPool({
      upstreams: { grynya: { url, transport: 'sse', timeouts: { connectMs: 2_000 } }, memory: memoryUpstream('one-down.jsonl') },
    });

    const run = await runAgent({ pool, prompt: 'Check yourself' });

    expect(run.text).not.toContain(SELF_CHECK_OK);
    expect(run.text).toMatch(/^Self-check failed: grynya is unavailable\./);
    expect(run.text).toMatch(/- grynya: unavailable: Upstream "grynya" is unavailable/);
  });

  it('an upstream with no probe to run is a failure, not a pass', async () => {
    const grynya = await startGrynya();
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya) } });

    // The read-only policy denies every grynya tool (none is annotated readOnlyHint), so nothing can probe it.
    const run = await runAgent({ pool, prompt: 'Check yourself', tools: { policy: 'read-only' } });

    expect(run.text).toMatch(/^Self-check failed: grynya has no probe\./);
    expect(run.text).toContain('its probe grynya__query_graph is denied by policy "read-only"');
    expect(grynya.stats.toolCalls).toBe(0);
  });

  it('runs an explicit script through the same loop', async () => {
    const grynya = await startGrynya();
    await using pool = await createSessionPool({ upstreams: { grynya: grynyaUpstream(grynya) } });
    const model = createScriptedModel({
      steps: [
        { text: 'Counting.', toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }] },
        { text: 'There are nodes.' },
      ],
    });

    const run = await runAgent({ pool, prompt: 'Count', model });

    expect(run).toMatchObject({ text: 'Counting.\n\nThere are nodes.', finishReason: 'stop', steps: 2, model: 'scripted:script' });
    expect(run.toolCalls).toMatchObject([{ toolName: 'grynya__query_graph', ok: true }]);
  });
});
