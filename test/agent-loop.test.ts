import { createSessionPool, runAgent, type AgentEvent } from '@klym/core';
import { createFakeGrynya, pythonJsonDumps } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { grynyaPool } from './support/grynya-pool.ts';
import { createMockModel as mockModel, textUntilAborted } from '@klym/core/testing';
import { eventTypes, toolStepThenAnswer } from './support/agent-events.ts';
import { toolCallIdsIn, toolResultsIn } from './support/mock-model.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const count = { name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } };

describe('runAgent: the tool loop against the fake grynya', () => {
  it('multi-step tool use: calls a tool, reads its result, answers; every step reaches onEvent', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.graph.mergeNode('Person', { id: 'p1', name: 'Ada' });
    // Each query takes grynya 40 ms: a tool call's duration includes it.
    grynya.faults.delayMs = 40;
    const model = mockModel([
      { text: 'Counting.', toolCalls: [{ id: 'c1', ...count }] },
      { text: 'There is 1 node.', usage: { input: 300, output: 10 } },
    ]);
    const events: AgentEvent[] = [];

    const startedAt = performance.now();
    const run = await runAgent({ pool, prompt: 'How many nodes?', model, onEvent: (event) => events.push(event) });
    const runMs = performance.now() - startedAt;

    expect(run).toMatchObject({ text: 'Counting.\n\nThere is 1 node.', finishReason: 'stop', steps: 2, model: 'mock:scripted-steps' });
    expect(run.usage).toEqual({ inputTokens: 400, outputTokens: 30, totalTokens: 430, estimated: false });
    expect(run.costUsd).toBeUndefined();
    expect(run.toolCalls).toMatchObject([
      { step: 1, toolCallId: 'c1', toolName: 'grynya__query_graph', ok: true, args: { query: 'MATCH (n) RETURN count(n)' } },
    ]);
    expect(grynya.stats.calls.query_graph).toBe(1);

    // The first call offered the tools with their MCP schemas and described them in the system prompt.
    const first = model.doStreamCalls[0];
    // Klym's own tools over artifacts come with every run.
    expect(first?.tools?.map((tool) => tool.name).toSorted()).toEqual([
      'grynya__add_node',
      'grynya__create_session',
      'grynya__link_nodes',
      'grynya__query_graph',
      'grynya__update_last_event',
      'klym__grep_artifact',
      'klym__map_artifact',
      'klym__query_artifact',
      'klym__read_artifact',
      'klym__run_code',
    ]);
    const system = first?.prompt[0];
    expect(system?.role).toBe('system');
    expect(system?.content).toContain('- grynya__query_graph (query_graph)');
    expect(system?.content).toContain('  - query: string, required');
    // The second call read the upstream's result as it came.
    const results = toolResultsIn(model.doStreamCalls[1]);
    expect(results.get('c1')).toEqual({
      toolName: 'grynya__query_graph',
      type: 'text',
      text: pythonJsonDumps({ status: 'success', results: [{ 'count(n)': 1 }] }),
    });

    expect(eventTypes(events)).toEqual(toolStepThenAnswer());
    expect(events.find((event) => event.type === 'tool-call')).toMatchObject({ step: 1, toolCallId: 'c1', args: { query: 'MATCH (n) RETURN count(n)' } });
    const result = events.find((event) => event.type === 'tool-result');
    expect(result).toMatchObject({ step: 1, isError: false, preview: expect.stringContaining('"status": "success"') });
    // From the call to its result: grynya's 40 ms at least (a timer may fire a millisecond early), within the run.
    const durationMs = result?.type === 'tool-result' ? result.durationMs : Number.NaN;
    expect(durationMs).toBeGreaterThanOrEqual(39);
    expect(durationMs).toBeLessThanOrEqual(runMs);
    expect(run.toolCalls[0]?.durationMs).toBe(durationMs);
    expect(events.find((event) => event.type === 'llm-response')).toMatchObject({ step: 1, finishReason: 'tool-calls', usage: { totalTokens: 120 } });
  });

  it('a tool that fails does not end the run: a timeout becomes a tool error the model reads, and the upstream is told to cancel', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.faults.delayMs = 5_000;
    const model = mockModel([{ toolCalls: [{ id: 'slow', ...count }] }, { text: 'The graph did not answer in time.' }]);
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Count', model, toolTimeoutMs: 200, onEvent: (event) => events.push(event) });

    expect(run).toMatchObject({ finishReason: 'stop', text: 'The graph did not answer in time.', steps: 2 });
    expect(run.toolCalls).toMatchObject([{ toolCallId: 'slow', ok: false, error: expect.stringContaining('did not answer query_graph within 200 ms') }]);
    expect(events.find((event) => event.type === 'tool-error')).toMatchObject({ toolCallId: 'slow', code: 'UPSTREAM_TIMEOUT' });
    expect(toolResultsIn(model.doStreamCalls[1]).get('slow')).toMatchObject({ type: 'error-text', text: expect.stringContaining('within 200 ms') });
    await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
  });

  it('grynya\'s {"status":"error"} is a result the model reads, not an exception', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.faults.error = 'Missing node id';
    const model = mockModel([{ toolCalls: [{ id: 'bad', ...count }] }, { text: 'The database said no.' }]);

    const run = await runAgent({ pool, prompt: 'Count', model });

    expect(run.finishReason).toBe('stop');
    expect(toolResultsIn(model.doStreamCalls[1]).get('bad')?.text).toBe('{"status": "error", "message": "Missing node id"}');
  });

  it('a denied tool is hidden from the model; a call to it anyway is a tool error naming the policy, logged, and never reaches the upstream', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const model = mockModel([
      {
        toolCalls: [
          { id: 'write', name: 'grynya__add_node', args: { node_type: 'Note', node_data: { id: 'n1' } } },
          { id: 'read', ...count },
        ],
      },
      { text: 'I may only read.' },
    ]);
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Add a note',
      model,
      tools: { policy: 'read-only' },
      upstreamTools: { grynya: { readOnlyTools: ['query_graph'] } },
      onEvent: (event) => events.push(event),
    });

    expect(model.doStreamCalls[0]?.tools?.map((tool) => tool.name).toSorted()).toEqual([
      'grynya__query_graph',
      'klym__grep_artifact',
      'klym__map_artifact',
      'klym__query_artifact',
      'klym__read_artifact',
      'klym__run_code',
    ]);
    expect(model.doStreamCalls[0]?.prompt[0]?.content).toMatch(/Denied for this run: .*grynya__add_node \(policy "read-only"\)/);
    expect(events.find((event) => event.type === 'run-start')).toMatchObject({
      tools: ['grynya__query_graph'],
      denied: expect.arrayContaining([{ toolName: 'grynya__add_node', policy: 'policy "read-only"' }]),
    });
    expect(events.find((event) => event.type === 'tool-denied')).toMatchObject({
      toolCallId: 'write',
      toolName: 'grynya__add_node',
      policy: 'policy "read-only"',
      reason: expect.stringContaining('not read-only'),
    });
    expect(events.find((event) => event.type === 'tool-error')).toMatchObject({ toolCallId: 'write', code: 'TOOL_DENIED' });
    expect(toolResultsIn(model.doStreamCalls[1]).get('write')).toMatchObject({
      type: 'error-text',
      text: expect.stringContaining('denied by policy "read-only"'),
    });
    expect(run.toolCalls.map((call) => [call.toolCallId, call.ok])).toEqual(
      expect.arrayContaining([
        ['write', false],
        ['read', true],
      ]),
    );
    expect(grynya.stats.calls.add_node).toBeUndefined();
    expect(grynya.graph.nodes.size).toBe(0);
  });

  it('allow and deny patterns per run and per upstream', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const model = mockModel([
      { toolCalls: [{ id: 'link', name: 'grynya__link_nodes', args: { source_id: 'a', target_id: 'b', rel_type: 'KNOWS' } }] },
      { text: 'Denied.' },
    ]);
    const events: AgentEvent[] = [];

    await runAgent({
      pool,
      prompt: 'Link',
      model,
      tools: { deny: ['grynya__link_*'] },
      upstreamTools: { grynya: { allow: ['query_graph', 'link_nodes', 'add_node'] } },
      onEvent: (event) => events.push(event),
    });

    expect(model.doStreamCalls[0]?.tools?.map((tool) => tool.name).toSorted()).toEqual([
      'grynya__add_node',
      'grynya__query_graph',
      'klym__grep_artifact',
      'klym__map_artifact',
      'klym__query_artifact',
      'klym__read_artifact',
      'klym__run_code',
    ]);
    const start = events.find((event) => event.type === 'run-start');
    expect(start?.type === 'run-start' && start.denied).toEqual(
      expect.arrayContaining([
        { toolName: 'grynya__create_session', policy: 'upstream "grynya" rules' },
        { toolName: 'grynya__link_nodes', policy: 'run deny list' },
      ]),
    );
    expect(events.find((event) => event.type === 'tool-denied')).toMatchObject({
      policy: 'run deny list',
      reason: '"grynya__link_nodes" matches the deny pattern "grynya__link_*"',
    });
    expect(grynya.stats.toolCalls).toBe(0);
  });

  it('an unknown tool and invalid arguments are tool errors the model reads; the upstream is not called', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const model = mockModel([
      {
        toolCalls: [
          { id: 'ghost', name: 'grynya__drop_everything', args: {} },
          { id: 'typo', name: 'grynya__query_graph', args: { query: 5 } },
          { id: 'broken', name: 'grynya__query_graph', input: '{"query": "RETURN' },
        ],
      },
      { text: 'I made mistakes.' },
    ]);
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Oops', model, onEvent: (event) => events.push(event) });

    expect(run.finishReason).toBe('stop');
    const errors = events.filter((event) => event.type === 'tool-error');
    expect(errors.map((event) => [event.toolCallId, event.code])).toEqual(
      expect.arrayContaining([
        ['ghost', 'NO_SUCH_TOOL'],
        ['typo', 'INVALID_TOOL_INPUT'],
        ['broken', 'INVALID_TOOL_INPUT'],
      ]),
    );
    const results = toolResultsIn(model.doStreamCalls[1]);
    expect(results.get('ghost')?.text).toContain("unavailable tool 'grynya__drop_everything'");
    expect(results.get('typo')?.text).toContain('Invalid arguments for grynya__query_graph');
    expect(results.get('typo')?.text).toContain('must be string');
    expect(results.get('broken')?.type).toBe('error-text');
    expect(grynya.stats.toolCalls).toBe(0);
  });

  it('names an upstream that is down as unavailable, in the events and the system prompt, and works with the rest', async () => {
    const { grynya } = await grynyaPool(cleanups);
    const dead = await createFakeGrynya();
    const deadUrl = dead.sseUrl;
    await dead.close();
    await using pool = await createSessionPool({
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', headers: { Host: 'localhost' } }, archive: { url: deadUrl, transport: 'sse' } },
    });
    const model = mockModel([{ toolCalls: [{ id: 'c', ...count }] }, { text: 'Done with what I had.' }]);
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Count', model, onEvent: (event) => events.push(event) });

    expect(run.finishReason).toBe('stop');
    expect(events[0]).toMatchObject({
      type: 'run-start',
      unavailable: [{ upstream: 'archive', error: expect.stringContaining('Upstream "archive" is unavailable') }],
    });
    expect(model.doStreamCalls[0]?.prompt[0]?.content).toContain('## archive: unavailable (Upstream "archive" is unavailable');
  });

  it('keeps a custom system prompt, with the tools placed at {{tools}}', async () => {
    const { pool } = await grynyaPool(cleanups);
    const model = mockModel([{ text: 'ok' }]);

    await runAgent({ pool, prompt: 'Hi', model, systemPrompt: 'You are a test.\nTOOLS:\n{{tools}}\nEND', temperature: 0.2 });

    const system = model.doStreamCalls[0]?.prompt[0]?.content as string;
    expect(system.startsWith('You are a test.\nTOOLS:\nCall tools by their namespaced name')).toBe(true);
    expect(system.endsWith('\nEND')).toBe(true);
    expect(model.doStreamCalls[0]?.temperature).toBe(0.2);
  });
});

describe('runAgent: cancellation and orphaned tool calls', () => {
  it('aborting mid-LLM stops the model request; the run ends cancelled with the partial text', async () => {
    const { pool } = await grynyaPool(cleanups);
    const controller = new AbortController();
    const model = mockModel([textUntilAborted('The answer is', () => setTimeout(() => controller.abort(), 20))]);

    const run = await runAgent({ pool, prompt: 'Think', model, signal: controller.signal });

    expect(run).toMatchObject({ finishReason: 'cancelled', text: 'The answer is', steps: 1 });
    expect(run.usage.estimated).toBe(true);
    expect(model.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
  });

  it('aborting mid-tool cancels the upstream call (it receives notifications/cancelled); the next run removes the orphaned call', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.faults.hang = true;
    const controller = new AbortController();
    const first = mockModel([{ text: 'Looking.', toolCalls: [{ id: 'stuck', ...count }] }]);
    const events: AgentEvent[] = [];

    const cancelled = await runAgent({
      pool,
      prompt: 'Count',
      model: first,
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'tool-call') setTimeout(() => controller.abort(), 50);
      },
    });

    expect(cancelled).toMatchObject({ finishReason: 'cancelled', text: 'Looking.', steps: 1 });
    await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
    expect(events.at(-1)).toMatchObject({ type: 'run-end', finishReason: 'cancelled' });
    // The conversation keeps the call that never got a result...
    expect(JSON.stringify(cancelled.messages)).toContain('"toolCallId":"stuck"');

    grynya.faults.hang = false;
    const second = mockModel([{ text: 'Resumed without the lost call.' }]);
    const resumedEvents: AgentEvent[] = [];
    const resumed = await runAgent({ pool, prompt: 'Go on', model: second, messages: cancelled.messages, onEvent: (event) => resumedEvents.push(event) });

    // ...and the next run removes it before calling the model, and says so.
    expect(resumed.finishReason).toBe('stop');
    expect(resumedEvents.find((event) => event.type === 'orphan-removed')).toEqual({ type: 'orphan-removed', step: 1, toolCallIds: ['stuck'] });
    expect(toolCallIdsIn(second.doStreamCalls[0])).toEqual([]);
    expect(second.doStreamCalls[0]?.prompt.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(JSON.stringify(resumed.messages)).not.toContain('stuck');
  });

  it('a signal aborted before the start ends the run at once, cancelled', async () => {
    const { pool } = await grynyaPool(cleanups);
    const model = mockModel([]);

    const run = await runAgent({ pool, prompt: 'Never', model, signal: AbortSignal.abort() });

    expect(run).toMatchObject({ finishReason: 'cancelled', steps: 0, text: '' });
    expect(model.doStreamCalls).toHaveLength(0);
  });
});
