import { createSessionPool, runAgent, type AgentEvent } from '@klym/core';
import { createMockModel } from '@klym/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolResultsIn } from './support/mock-model.ts';
import { startServerEverything, type RunningServer } from './support/upstream-servers.ts';

let server: RunningServer;
beforeAll(async () => {
  server = await startServerEverything('streamableHttp');
});
afterAll(() => server.stop());

describe('runAgent against @modelcontextprotocol/server-everything (Streamable HTTP)', () => {
  it('results reach the model faithfully: text, structuredContent, images as files, isError as an error', async () => {
    await using pool = await createSessionPool({ upstreams: { everything: { url: server.url } } });
    const model = createMockModel([
      {
        toolCalls: [
          { id: 'echo', name: 'everything__echo', args: { message: 'привіт' } },
          { id: 'weather', name: 'everything__get-structured-content', args: { location: 'Chicago' } },
          { id: 'image', name: 'everything__get-tiny-image', args: {} },
          { id: 'broken', name: 'everything__get-resource-reference', args: { resourceId: 0 } },
        ],
      },
      { text: 'Seen it all.' },
    ]);
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Try the tools', model, onEvent: (event) => events.push(event) });

    expect(run).toMatchObject({ finishReason: 'stop', text: 'Seen it all.', steps: 2 });
    const results = toolResultsIn(model.doStreamCalls[1]);
    expect(results.get('echo')).toMatchObject({ type: 'text', text: 'Echo: привіт' });
    expect(results.get('weather')?.text).toBe('{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}');
    expect(results.get('image')?.type).toBe('content');
    expect(results.get('image')?.text).toContain('[file image/png]');
    expect(results.get('broken')).toMatchObject({ type: 'error-text', text: expect.stringContaining('Invalid resourceId: 0') });
    const outcome = Object.fromEntries(events.flatMap((event) => (event.type === 'tool-result' ? [[event.toolCallId, event.isError]] : [])));
    expect(outcome).toEqual({ echo: false, weather: false, image: false, broken: true });
    expect(run.toolCalls.find((call) => call.toolCallId === 'broken')).toMatchObject({ ok: false, error: expect.stringContaining('Invalid resourceId') });
  });

  it('describes its tools per upstream for the system prompt: names, parameters with type and required/optional', async () => {
    await using pool = await createSessionPool({ upstreams: { everything: { url: server.url } } });
    const model = createMockModel([{ text: 'ok' }]);

    await runAgent({ pool, prompt: 'Hi', model, tools: { policy: 'read-only' } });

    const system = model.doStreamCalls[0]?.prompt[0]?.content as string;
    expect(system).toContain(
      '- everything__echo (echo) [read-only]\n  Echoes back the input string\n  Parameters:\n  - message: string, required — Message to echo',
    );
    expect(system).toContain('  - location: one of "New York", "Chicago", "Los Angeles", required — Choose city');
    expect(system).toMatch(/- duration: number, optional \(default 10\) — Duration of the operation in seconds/);
    expect(system).toMatch(/Denied for this run: .*everything__toggle-simulated-logging/);
  });

  it('aborting mid-tool ends a long operation at once, cancelled', async () => {
    await using pool = await createSessionPool({ upstreams: { everything: { url: server.url } } });
    const controller = new AbortController();
    const model = createMockModel([
      { text: 'Starting a long one.', toolCalls: [{ name: 'everything__trigger-long-running-operation', args: { duration: 30, steps: 3 } }] },
    ]);
    const started = performance.now();

    const run = await runAgent({
      pool,
      prompt: 'Run it',
      model,
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === 'tool-call') setTimeout(() => controller.abort(), 100);
      },
    });

    expect(run).toMatchObject({ finishReason: 'cancelled', text: 'Starting a long one.' });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(pool.status().everything?.calls).toMatchObject({ failed: 1, inFlight: 0 });
  });
});
