import { runAgent, type AgentCheckpoint, type AgentEvent, type RunAgentOptions, type SessionPool } from '@klym/core';
import { createScriptedModel, type ScriptedStep } from '@klym/core/internal';
import { createMockModel, type MockTurn } from '@klym/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { eventTypes, toolStepThenAnswer } from './support/agent-events.ts';
import { grynyaPool } from './support/grynya-pool.ts';

// The scripted model's steps are not streamed: each is one `generateText` call. What a run reports must
// not depend on that, so each scenario runs twice over the real fake grynya — once with the scripted model,
// once with the AI SDK's mock model streaming the same answers — and the two runs must match.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

type Call = { readonly id: string; readonly name: string; readonly args: unknown };
type Turn = { readonly text?: string; readonly calls?: readonly Call[] };

const scriptedStep = (turn: Turn): ScriptedStep => ({
  ...(turn.text === undefined ? {} : { text: turn.text }),
  ...(turn.calls === undefined ? {} : { toolCalls: turn.calls.map((call) => ({ toolCallId: call.id, toolName: call.name, args: call.args })) }),
});
// No usage reported, as the scripted model reports none: both runs estimate it from the same characters.
const mockTurn = (turn: Turn): MockTurn => ({
  ...(turn.text === undefined ? {} : { text: turn.text }),
  ...(turn.calls === undefined ? {} : { toolCalls: turn.calls.map((call) => ({ id: call.id, name: call.name, args: call.args })) }),
  usage: null,
});

interface Observed {
  readonly events: AgentEvent[];
  readonly checkpoints: AgentCheckpoint[];
  readonly result: unknown;
}

/**
 * `value` as JSON, without what differs by nature: timings, the model's name, the model's own words when it
 * fails, and a request's `tokens`, which only a model with a context window reports (the scripted model has none).
 */
function comparable<T>(value: T): T {
  return JSON.parse(
    JSON.stringify(value, (key, field: unknown) => {
      if (['durationMs', 'elapsedMs', 'model'].includes(key)) return 0;
      if (key === 'tokens') return undefined;
      return typeof field === 'string' && field.startsWith('Model ') ? field.replace(/^Model \S+ failed: .*$/s, 'Model … failed: …') : field;
    }),
  ) as T;
}

/** A run with `model`: everything it reported, made {@link comparable}. */
async function observe(pool: SessionPool, model: RunAgentOptions['model'], options: Partial<RunAgentOptions> = {}): Promise<Observed> {
  const events: AgentEvent[] = [];
  const checkpoints: AgentCheckpoint[] = [];
  let result: unknown;
  try {
    result = await runAgent({
      pool,
      prompt: 'Go',
      model,
      ...options,
      onEvent: (event) => events.push(event),
      onCheckpoint: (checkpoint) => checkpoints.push(structuredClone(checkpoint)),
    });
  } catch (error) {
    result = { rejected: error instanceof Error ? error.message : String(error) };
  }
  return { events: comparable(events), checkpoints: comparable(checkpoints), result: comparable(result) };
}

async function bothWays(pool: SessionPool, turns: readonly Turn[], options: Partial<RunAgentOptions> = {}) {
  const scripted = await observe(pool, createScriptedModel({ steps: turns.map(scriptedStep) }), options);
  const streamed = await observe(pool, createMockModel(turns.map(mockTurn)), options);
  return { scripted, streamed };
}

const count = (id: string): Call => ({ id, name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } });

describe('a step that is not streamed (the scripted model)', () => {
  it('reports what a streamed step reports: the same events in the same order, result, usage and checkpoints', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.graph.mergeNode('Person', { id: 'p1', name: 'Ada' });

    const { scripted, streamed } = await bothWays(pool, [{ text: 'Counting.', calls: [count('c1'), count('c2')] }, { text: 'There is 1 node.' }]);

    expect(scripted).toEqual(streamed);
    expect(eventTypes(scripted.events)).toEqual(toolStepThenAnswer(2));
    expect(scripted.result).toMatchObject({ text: 'Counting.\n\nThere is 1 node.', finishReason: 'stop', steps: 2, usage: { estimated: true } });
    // A checkpoint right before each call went out, and one when it answered, with the step's text so far.
    expect(scripted.checkpoints.filter((checkpoint) => checkpoint.current !== undefined).map((checkpoint) => checkpoint.current?.text)).toEqual([
      'Counting.',
      'Counting.',
      'Counting.',
      'Counting.',
    ]);
    expect(grynya.stats.calls.query_graph).toBe(4);
  });

  it('a tool that fails, a denied tool, an unknown tool and bad arguments: the same tool errors, each read by the model', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.faults.delayMs = 2_000;
    const turns: Turn[] = [
      {
        calls: [
          count('slow'),
          { id: 'write', name: 'grynya__add_node', args: { node_type: 'Note', node_data: { id: 'n1' } } },
          { id: 'ghost', name: 'grynya__drop_everything', args: {} },
          { id: 'typo', name: 'grynya__query_graph', args: { query: 5 } },
        ],
      },
      { text: 'Nothing worked.' },
    ];
    const options = { toolTimeoutMs: 200, tools: { deny: ['grynya__add_*'] } };

    const { scripted, streamed } = await bothWays(pool, turns, options);

    expect(scripted).toEqual(streamed);
    const errors = scripted.events.flatMap((event) => (event.type === 'tool-error' ? [[event.toolCallId, event.code]] : []));
    expect(errors).toEqual(
      expect.arrayContaining([
        ['slow', 'UPSTREAM_TIMEOUT'],
        ['write', 'TOOL_DENIED'],
        ['ghost', 'NO_SUCH_TOOL'],
        ['typo', 'INVALID_TOOL_INPUT'],
      ]),
    );
    expect(scripted.events.find((event) => event.type === 'tool-denied')).toMatchObject({ toolCallId: 'write', policy: 'run deny list' });
    expect(scripted.result).toMatchObject({ finishReason: 'stop', text: 'Nothing worked.', steps: 2 });
    // Only the slow call reached the upstream, in each run; the denied write never did.
    expect(grynya.stats.calls.query_graph).toBe(2);
    expect(grynya.stats.calls.add_node).toBeUndefined();
  });

  it('a model that fails (the script has no answer left): the same run-end and MODEL_ERROR', async () => {
    const { pool } = await grynyaPool(cleanups);

    const { scripted, streamed } = await bothWays(pool, [{ text: 'One step.', calls: [count('c1')] }]);

    expect(scripted).toEqual(streamed);
    expect(scripted.events.at(-1)).toMatchObject({ type: 'run-end', finishReason: 'error', error: { code: 'MODEL_ERROR' } });
    expect(scripted.result).toEqual({ rejected: 'Model … failed: …' });
  });

  it('aborting mid-tool cancels the upstream call and ends the run cancelled, its text kept and the cut call left for the next run to remove', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    grynya.faults.hang = true;
    const controller = new AbortController();
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Count',
      model: createScriptedModel({ steps: [scriptedStep({ text: 'Looking.', calls: [count('stuck')] })] }),
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'tool-call') setTimeout(() => controller.abort(), 50);
      },
    });

    expect(run).toMatchObject({ finishReason: 'cancelled', text: 'Looking.', steps: 1 });
    await vi.waitFor(() => expect(grynya.stats.cancelled).toBe(1));
    // As with a stream: the call cut off has no result, and the model never answered the step.
    expect(eventTypes(events)).toEqual(['run-start', 'step-start', 'llm-request', 'tool-call', 'step-end', 'run-end']);
    expect(JSON.stringify(run.messages)).toContain('"toolCallId":"stuck"');

    grynya.faults.hang = false;
    const resumedEvents: AgentEvent[] = [];
    const resumed = await runAgent({
      pool,
      prompt: 'Go on',
      model: createScriptedModel({ steps: [{ text: 'Done.' }] }),
      messages: run.messages,
      onEvent: (event) => resumedEvents.push(event),
    });
    expect(resumed.finishReason).toBe('stop');
    expect(resumedEvents.find((event) => event.type === 'orphan-removed')).toEqual({ type: 'orphan-removed', step: 1, toolCallIds: ['stuck'] });
  });

  // The model would take 30 s to answer: the test's own time limit fails it if the abort does not stop it.
  it('aborting while the model answers stops it and ends the run cancelled, with nothing to show for the step', async () => {
    const { grynya, pool } = await grynyaPool(cleanups);
    const controller = new AbortController();
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Think',
      model: createScriptedModel({
        steps: [{ text: 'Too late.', toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] }],
        delayMs: 30_000,
      }),
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'llm-request') setTimeout(() => controller.abort(), 20);
      },
    });

    expect(run).toMatchObject({ finishReason: 'cancelled', text: '', steps: 1, toolCalls: [] });
    expect(run.usage.estimated).toBe(true);
    expect(eventTypes(events)).toEqual(['run-start', 'step-start', 'llm-request', 'step-end', 'run-end']);
    expect(grynya.stats.toolCalls).toBe(0);
  });
});
