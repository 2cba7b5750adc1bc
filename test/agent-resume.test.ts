import { createSessionPool, runAgent, type AgentCheckpoint, type AgentEvent, type SessionPool } from '@klym/core';
import { createInMemoryUpstream, createMockModel, textUntilAborted } from '@klym/core/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { toolResultsIn } from './support/mock-model.ts';

const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

/**
 * An in-memory upstream with two tools that count what reaches them: `note` answers at once; `launch`
 * tells the test it started, then works until its request is cancelled — a call in flight when the
 * process "dies".
 */
async function launchPad(): Promise<{ pool: SessionPool; calls: { note: number; launch: number }; launched: Promise<void> }> {
  const calls = { note: 0, launch: 0 };
  const started = Promise.withResolvers<void>();
  const server = (): McpServer => {
    const mcp = new McpServer({ name: 'pad', version: '1.0.0' });
    mcp.registerTool('note', { inputSchema: { text: z.string() } }, ({ text }) => {
      calls.note++;
      return { content: [{ type: 'text', text: `noted ${text}` }] };
    });
    mcp.registerTool('launch', { inputSchema: { target: z.string() } }, (_args, extra) => {
      calls.launch++;
      started.resolve();
      return new Promise((_resolve, reject) => extra.signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
    });
    return mcp;
  };
  const pool = await createSessionPool({ upstreams: { pad: createInMemoryUpstream(server) } });
  pools.push(pool);
  return { pool, calls, launched: started.promise };
}

const note = { name: 'pad__note', args: { text: 'hi' } };
const launch = { name: 'pad__launch', args: { target: 'moon' } };
/** Whether the store holds `note`'s result (call `c1`). */
const noted = (saved: AgentCheckpoint): boolean => saved.current?.calls.some((call) => call.toolCallId === 'c1' && call.output !== undefined) === true;
/** What a store hands back after a restart: the checkpoint as JSON, parsed. */
const stored = (checkpoint: AgentCheckpoint | undefined): AgentCheckpoint => JSON.parse(JSON.stringify(checkpoint)) as AgentCheckpoint;

/**
 * Runs until the upstream is serving `launch` (and the store holds a checkpoint that is `ready`), then
 * "kills" the run: returns what the store held at that moment, as it would read it back after a restart.
 */
async function killedDuringLaunch(
  pool: SessionPool,
  launched: Promise<void>,
  steps: Parameters<typeof createMockModel>[0],
  ready: (checkpoint: AgentCheckpoint) => boolean = () => true,
): Promise<AgentCheckpoint> {
  const controller = new AbortController();
  let latest: AgentCheckpoint | undefined;
  const saved = Promise.withResolvers<void>();
  const onCheckpoint = (checkpoint: AgentCheckpoint): void => {
    latest = checkpoint;
    if (ready(checkpoint)) saved.resolve();
  };
  const run = runAgent({ pool, prompt: 'Note, then launch', model: createMockModel(steps), signal: controller.signal, onCheckpoint });
  await Promise.all([launched, saved.promise]);
  const atDeath = stored(latest);
  // The abort only stops the first run; everything after uses what the store held at the moment of death.
  controller.abort();
  await run;
  return atDeath;
}

describe('runAgent checkpoints', () => {
  it('saves the run before each tool call is sent, when it answers, and after every step; the conversation only grows', async () => {
    const { pool, calls } = await launchPad();
    const checkpoints: AgentCheckpoint[] = [];
    const model = createMockModel([
      { text: 'Noting.', toolCalls: [{ id: 'c1', ...note }], usage: { input: 100, output: 20 } },
      { text: 'Noted.', usage: { input: 300, output: 10 } },
    ]);

    const run = await runAgent({ pool, prompt: 'Note hi', model, onCheckpoint: (checkpoint) => checkpoints.push(checkpoint) });

    expect(run).toMatchObject({ text: 'Noting.\n\nNoted.', finalText: 'Noted.', steps: 2 });
    expect(run.resumedFrom).toBeUndefined();
    expect(calls.note).toBe(1);
    const prompt = { role: 'user', content: 'Note hi' };
    const [beforeCall, answered, step1, step2] = checkpoints;
    expect(checkpoints).toHaveLength(4);
    expect(beforeCall).toMatchObject({ steps: 0, messages: [prompt], texts: [], toolCalls: 0, usage: { totalTokens: 0 } });
    expect(beforeCall?.current).toEqual({ step: 1, text: 'Noting.', calls: [{ toolCallId: 'c1', toolName: 'pad__note', input: { text: 'hi' } }] });
    expect(answered?.current?.calls).toEqual([{ toolCallId: 'c1', toolName: 'pad__note', input: { text: 'hi' }, output: { type: 'text', value: 'noted hi' } }]);
    expect(step1).toMatchObject({ steps: 1, texts: ['Noting.'], toolCalls: 1, usage: { totalTokens: 120 } });
    expect(step1?.current).toBeUndefined();
    expect(step1?.messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool']);
    expect(JSON.stringify(step1?.messages)).toContain('noted hi');
    expect(step2).toMatchObject({ steps: 2, texts: ['Noting.', 'Noted.'], toolCalls: 1, usage: { totalTokens: 430 } });
    expect(step2?.messages).toEqual(run.messages);

    for (const [index, checkpoint] of checkpoints.entries()) {
      const before = checkpoints[index - 1];
      if (before === undefined) continue;
      // The store writes incrementally: the earlier messages are still there, the very same objects.
      before.messages.forEach((message, at) => expect(checkpoint.messages[at]).toBe(message));
      expect(checkpoint.elapsedMs).toBeGreaterThanOrEqual(before.elapsedMs);
    }
    for (const checkpoint of checkpoints) expect(stored(checkpoint)).toEqual(checkpoint);
  });

  it('records no call that was never sent: a denied tool, invalid arguments', async () => {
    const { pool, calls } = await launchPad();
    const checkpoints: AgentCheckpoint[] = [];
    const model = createMockModel([
      {
        toolCalls: [
          { id: 'denied', ...launch },
          { id: 'invalid', name: 'pad__note', args: { text: 5 } },
        ],
      },
      { text: 'Neither worked.' },
    ]);

    await runAgent({ pool, prompt: 'Try', model, tools: { deny: ['pad__launch'] }, onCheckpoint: (checkpoint) => checkpoints.push(checkpoint) });

    expect(calls).toEqual({ note: 0, launch: 0 });
    expect(checkpoints.map((checkpoint) => [checkpoint.steps, checkpoint.current])).toEqual([
      [1, undefined],
      [2, undefined],
    ]);
  });

  it('a store that fails does not stop the run, but a call whose record could not be stored is not sent', async () => {
    const { pool, calls } = await launchPad();
    const model = createMockModel([{ toolCalls: [note] }, { text: 'Done.' }]);
    const events: AgentEvent[] = [];

    let attempts = 0;
    const failingStore = (): void => {
      attempts++;
      throw new Error('disk full');
    };

    const run = await runAgent({ pool, prompt: 'Note', model, onCheckpoint: failingStore, onEvent: (event) => events.push(event) });

    expect(run).toMatchObject({ finishReason: 'stop', finalText: 'Done.' });
    expect(calls.note ?? 0).toBe(0);
    expect(events.find((event) => event.type === 'tool-error')).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('The call was not sent: its record could not be stored (disk full)'),
    });
    // Before the call (refused), then after each of the two steps.
    expect(attempts).toBe(3);
  });
});

describe('runAgent resume', () => {
  it('a run killed mid-tool-call resumes without sending the call again; the model is told its outcome is unknown', async () => {
    const { pool, calls, launched } = await launchPad();
    const checkpoint = await killedDuringLaunch(pool, launched, [
      { text: 'Noting.', toolCalls: [{ id: 'c1', ...note }] },
      { text: 'Launching.', toolCalls: [{ id: 'l1', ...launch }] },
    ]);
    expect(checkpoint).toMatchObject({ steps: 1, current: { step: 2, text: 'Launching.', calls: [{ toolCallId: 'l1', toolName: 'pad__launch' }] } });
    expect(checkpoint.current?.calls[0]?.output).toBeUndefined();

    const model = createMockModel([{ text: 'The launch may have happened; I will check before launching again.' }]);
    const events: AgentEvent[] = [];
    const checkpoints: AgentCheckpoint[] = [];
    const run = await runAgent({
      pool,
      prompt: 'Note, then launch',
      model,
      resume: checkpoint,
      onEvent: (event) => events.push(event),
      onCheckpoint: (saved) => checkpoints.push(saved),
    });

    expect(calls).toEqual({ note: 1, launch: 1 });
    expect(run).toMatchObject({
      finishReason: 'stop',
      steps: 2,
      resumedFrom: 1,
      finalText: 'The launch may have happened; I will check before launching again.',
      text: 'Noting.\n\nLaunching.\n\nThe launch may have happened; I will check before launching again.',
    });
    expect(events[0]).toMatchObject({ type: 'run-start', resumed: { fromStep: 1, interruptedCalls: ['l1'] } });
    expect(events.find((event) => event.type === 'step-start')).toEqual({ type: 'step-start', step: 2 });

    const sent = model.doStreamCalls[0];
    // The prompt is the checkpoint's conversation, asked once, then the interrupted step with its unknown result.
    expect(sent?.prompt.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);
    const results = toolResultsIn(sent);
    expect(results.get('c1')).toMatchObject({ type: 'text', text: 'noted hi' });
    expect(results.get('l1')).toMatchObject({
      type: 'error-text',
      text: expect.stringContaining('interrupted by a restart of Klym before its result was recorded'),
    });
    expect(results.get('l1')?.text).toContain('may or may not have taken effect');

    // The resumed run's own checkpoints continue the stored conversation.
    const last = checkpoints.at(-1);
    expect(last).toMatchObject({
      steps: 2,
      toolCalls: 2,
      texts: ['Noting.', 'Launching.', 'The launch may have happened; I will check before launching again.'],
    });
    expect(last?.messages.slice(0, checkpoint.messages.length)).toEqual(checkpoint.messages);
  });

  it('a result recorded before the restart reaches the model as it came, and that call is not sent again either', async () => {
    const { pool, calls, launched } = await launchPad();
    const checkpoint = await killedDuringLaunch(
      pool,
      launched,
      [
        {
          toolCalls: [
            { id: 'c1', ...note },
            { id: 'l1', ...launch },
          ],
        },
      ],
      noted,
    );
    // Both calls went out; `note` answered and its result was recorded, `launch` never answered.
    expect(checkpoint.current?.calls).toEqual([
      { toolCallId: 'c1', toolName: 'pad__note', input: { text: 'hi' }, output: { type: 'text', value: 'noted hi' } },
      { toolCallId: 'l1', toolName: 'pad__launch', input: { target: 'moon' } },
    ]);

    const model = createMockModel([{ text: 'Noted; the launch is unknown.' }]);
    const run = await runAgent({ pool, prompt: 'Note, then launch', model, resume: checkpoint });

    expect(calls).toEqual({ note: 1, launch: 1 });
    expect(run).toMatchObject({ finishReason: 'stop', steps: 1, resumedFrom: 0, finalText: 'Noted; the launch is unknown.' });
    const results = toolResultsIn(model.doStreamCalls[0]);
    expect(results.get('c1')).toEqual({ toolName: 'pad__note', type: 'text', text: 'noted hi' });
    expect(results.get('l1')?.type).toBe('error-text');
  });

  it('a run that died while the model was answering asks the model again from the last completed step', async () => {
    const { pool, calls } = await launchPad();
    let latest: AgentCheckpoint | undefined;
    const controller = new AbortController();
    const first = createMockModel([{ text: 'Noting.', toolCalls: [{ id: 'c1', ...note }] }, textUntilAborted('Half an ans', () => controller.abort())]);
    // The store at death: the second step's model request was under way, nothing recorded past step 1.
    const onCheckpoint = (checkpoint: AgentCheckpoint): void => {
      if (checkpoint.steps === 1) latest ??= stored(checkpoint);
    };
    await runAgent({ pool, prompt: 'Note', model: first, signal: controller.signal, onCheckpoint });

    const model = createMockModel([{ text: 'All noted.' }]);
    const run = await runAgent({ pool, prompt: 'Note', model, resume: latest });

    expect(calls.note).toBe(1);
    expect(run).toMatchObject({ steps: 2, text: 'Noting.\n\nAll noted.', finalText: 'All noted.', resumedFrom: 1 });
    expect(model.doStreamCalls[0]?.prompt.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'tool']);
  });

  it('a run cut off mid-call by its signal resumes from its last checkpoint with that call reported as unknown, not dropped', async () => {
    const { pool, calls, launched } = await launchPad();
    const controller = new AbortController();
    let latest: AgentCheckpoint | undefined;
    const running = runAgent({
      pool,
      prompt: 'Launch',
      model: createMockModel([{ text: 'Launching.', toolCalls: [{ id: 'l1', ...launch }] }]),
      signal: controller.signal,
      onCheckpoint: (checkpoint) => (latest = checkpoint),
    });
    await launched;
    controller.abort();
    expect(await running).toMatchObject({ finishReason: 'cancelled' });
    // The step-end checkpoint of the cut-off step holds the call without a result.
    expect(latest).toMatchObject({ steps: 1 });
    expect(latest?.current).toBeUndefined();

    const model = createMockModel([{ text: 'Not launching twice.' }]);
    const events: AgentEvent[] = [];
    await runAgent({ pool, prompt: 'Launch', model, resume: stored(latest), onEvent: (event) => events.push(event) });

    expect(calls.launch).toBe(1);
    expect(events[0]).toMatchObject({ type: 'run-start', resumed: { fromStep: 1, interruptedCalls: ['l1'] } });
    expect(events.some((event) => event.type === 'orphan-removed')).toBe(false);
    expect(toolResultsIn(model.doStreamCalls[0]).get('l1')?.text).toContain('outcome is unknown');
  });
});

/** A checkpoint after two steps that used 900 tokens and 5 s. */
const afterTwoSteps = (overrides: Partial<AgentCheckpoint>): AgentCheckpoint => ({
  steps: 2,
  messages: [
    { role: 'user', content: 'Work' },
    { role: 'assistant', content: 'Step one.' },
    { role: 'user', content: 'Go on' },
    { role: 'assistant', content: 'Step two.' },
  ],
  texts: ['Step one.', 'Step two.'],
  usage: { inputTokens: 800, outputTokens: 100, totalTokens: 900, estimated: false },
  elapsedMs: 5_000,
  toolCalls: 0,
  ...overrides,
});

describe('runAgent resume: budgets count across the restart', () => {
  it('steps: a checkpoint of 2 steps under maxSteps 3 runs exactly one more step', async () => {
    const { pool } = await launchPad();
    const model = createMockModel([{ text: 'Step three.', toolCalls: [note] }, { text: 'Step four.' }]);
    const events: AgentEvent[] = [];

    const run = await runAgent({ pool, prompt: 'Work', model, budget: { maxSteps: 3 }, resume: afterTwoSteps({}), onEvent: (event) => events.push(event) });

    expect(run).toMatchObject({ finishReason: 'budget:steps', steps: 3, finalText: 'Step three.', text: 'Step one.\n\nStep two.\n\nStep three.' });
    expect(model.doStreamCalls).toHaveLength(1);
    expect(events).toContainEqual({ type: 'budget', name: 'steps', limit: 3, used: 3 });
  });

  it('time: a checkpoint that used the whole time budget ends at once with budget:time, without asking the model', async () => {
    const { pool } = await launchPad();
    const model = createMockModel([{ text: 'never' }]);

    const run = await runAgent({ pool, prompt: 'Work', model, budget: { timeoutMs: 5_000 }, resume: afterTwoSteps({}) });

    expect(run).toMatchObject({ finishReason: 'budget:time', steps: 2, finalText: 'Step two.', resumedFrom: 2 });
    expect(run.elapsedMs).toBeGreaterThanOrEqual(5_000);
    expect(model.doStreamCalls).toHaveLength(0);
  });

  it('time: what is left of the time budget is what the resumed run gets', async () => {
    const { pool } = await launchPad();
    const model = createMockModel([textUntilAborted('Still thinking')]);

    const run = await runAgent({ pool, prompt: 'Work', model, budget: { timeoutMs: 5_100 }, resume: afterTwoSteps({}) });

    expect(run).toMatchObject({ finishReason: 'budget:time', steps: 3 });
    expect(run.elapsedMs).toBeGreaterThanOrEqual(5_100);
    expect(run.elapsedMs).toBeLessThan(10_000);
  });

  it('tokens: the checkpoint usage counts toward maxTokens and is in the result', async () => {
    const { pool } = await launchPad();
    const model = createMockModel([{ toolCalls: [note], usage: { input: 100, output: 20 } }, { text: 'unreached' }]);

    const run = await runAgent({ pool, prompt: 'Work', model, budget: { maxTokens: 1_000 }, resume: afterTwoSteps({}) });

    expect(run).toMatchObject({ finishReason: 'budget:tokens', steps: 3 });
    expect(run.usage).toEqual({ inputTokens: 900, outputTokens: 120, totalTokens: 1_020, estimated: false });
    expect(model.doStreamCalls).toHaveLength(1);
  });

  it('refuses a checkpoint that is not one, naming the field', async () => {
    const { pool } = await launchPad();
    await expect(runAgent({ pool, prompt: 'Work', resume: afterTwoSteps({ steps: -1 }) })).rejects.toThrow(
      'Expected `resume.steps` to be an integer ≥ 0, got -1',
    );
    await expect(runAgent({ pool, prompt: 'Work', resume: afterTwoSteps({ messages: undefined as never }) })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });
});
