// Issue #27, the conversation stays inside the window: a run of many steps whose results are each
// under the artifact threshold, but together many times the window, over a real stdio upstream. Before each
// step the older results are moved out to artifacts, then older steps folded into a digest; the run never
// sends more than the window, still reads what it moved out, and resumes from a compacted checkpoint.
import path from 'node:path';
import { createSessionPool, runAgent, type AgentCheckpoint, type AgentEvent, type RunAgentOptions, type SessionPool } from '@klym/core';
import { ARTIFACT_DEFAULTS } from '@klym/core/artifacts';
import { createScriptedModel } from '@klym/core/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { bigLog } from './support/big-log-server.ts';
import { startFakeLlmServer } from './support/fake-llm-server.ts';

const STEPS = 100;
/** The model's window, as Klym is configured with it and as the fake enforces it (counted by o200k_base). */
const WINDOW = 64_000;
const KEY = 'sk-test-key-for-the-fake-0123456789';
/** Lines of each step's result: just under the artifact threshold (a tenth of the window). */
const LINES = 140;
const RESULT_TOKENS = countTokens(bigLog(LINES, 1));

let pool: SessionPool;
beforeAll(async () => {
  pool = await createSessionPool({
    upstreams: { big: { command: process.execPath, args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'big-log-server.ts')] } },
  });
});
afterAll(() => pool.close({ drainTimeoutMs: 100 }));

/** The scripted model's results: ~29,000 characters, under the artifact threshold of the window it is sized by. */
const SCRIPTED_LINES = 320;

/** A scripted model that reads the log `upTo` times, then stops. */
const reads = (upTo: number) =>
  createScriptedModel({
    steps: ({ call }) =>
      call <= upTo ? { toolCalls: [{ toolName: 'big__read_log', args: { lines: SCRIPTED_LINES, needle_at: call } }] } : { text: 'stopped' },
  });

describe('the conversation stays inside the window', () => {
  it(`runs ${STEPS} steps of medium results against a provider's hard window, never sending more than it, and still reads what it moved out`, async () => {
    let calls = 0;
    let movedOut: string | undefined;
    // The agent reads the log again and again; past the last read, it greps the first result moved out.
    const llm = await startFakeLlmServer(
      (request) => {
        calls++;
        movedOut ??= /artifact (art_[0-9a-f]{12}): [^"]*moved out of the conversation/.exec(request.body)?.[1];
        if (calls <= STEPS) return { kind: 'turn', toolCalls: [{ name: 'big__read_log', args: { lines: LINES, needle_at: calls } }] };
        if (calls === STEPS + 1)
          return { kind: 'turn', toolCalls: [{ name: 'klym__grep_artifact', args: { artifact: movedOut ?? 'none', pattern: 'FATAL' } }] };
        return { kind: 'turn', text: new RegExp(`1 match of \\\\"FATAL\\\\" among its ${LINES} lines`).test(request.body) ? 'read it back' : 'lost it' };
      },
      { contextWindow: WINDOW },
    );
    try {
      const events: AgentEvent[] = [];
      const result = await runAgent({
        pool,
        prompt: 'Read the log many times.',
        model: 'openai:gpt-4.1-mini',
        providers: { openai: { apiKey: KEY, baseURL: llm.openaiBaseUrl } },
        contextWindows: { 'openai:gpt-4.1-mini': WINDOW },
        budget: { maxSteps: STEPS + 5 },
        onEvent: (event) => void events.push(event),
      });

      expect(result).toMatchObject({ finishReason: 'stop', finalText: 'read it back', steps: STEPS + 2 });
      // Every request fitted the window as the provider counts it (o200k_base), with room to answer: none refused.
      expect(Math.max(...llm.requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY))).toBeLessThan(0.95 * WINDOW);
      expect(events.some((event) => event.type === 'context-shrunk')).toBe(false);
      const compactions = events.filter((event) => event.type === 'history-compacted');
      expect(compactions.length).toBeGreaterThan(0);
      expect(compactions.some((event) => event.results > 0)).toBe(true);
      expect(compactions.every((event) => event.tokensAfter < event.tokensBefore)).toBe(true);
      // Each result stayed in the conversation (under the artifact threshold); together they are over 3× the window.
      expect(RESULT_TOKENS).toBeLessThan(ARTIFACT_DEFAULTS.thresholdShare * WINDOW);
      expect(STEPS * RESULT_TOKENS).toBeGreaterThan(3 * WINDOW);
    } finally {
      await llm.close();
    }
  });

  it('resumes from a checkpoint taken after a compaction, and reads the artifacts it moved out', async () => {
    const checkpoints: AgentCheckpoint[] = [];
    const artifacts = new Map<string, { id: string; text: string }>();
    const backend = {
      save: async (artifact: { id: string; text: string }) => void artifacts.set(artifact.id, artifact),
      load: async (id: string) => artifacts.get(id) as never,
      list: async () => [...artifacts.values()] as never[],
    };
    await runAgent({
      pool,
      prompt: 'Read the log many times.',
      model: reads(30),
      budget: { maxSteps: 40 },
      artifacts: backend,
      onCheckpoint: (checkpoint) => void checkpoints.push(checkpoint),
    });
    const last = checkpoints.at(-1) as AgentCheckpoint;
    const moved = /artifact (art_[0-9a-f]{12}): [^"]*moved out of the conversation/.exec(JSON.stringify(last.messages))?.[1];
    expect(moved).toBeDefined();

    const resumed = await runAgent({
      pool,
      prompt: 'Read the log many times.',
      artifacts: backend,
      resume: last,
      budget: { maxSteps: 40 },
      model: createScriptedModel({
        steps: ({ options }) =>
          /1 match of \\"FATAL\\" among its 320 lines/.test(JSON.stringify(options.prompt))
            ? { text: 'still there' }
            : { toolCalls: [{ toolName: 'klym__grep_artifact', args: { artifact: moved, pattern: 'FATAL' } }] },
      }),
    });
    expect(resumed).toMatchObject({ finishReason: 'stop', finalText: 'still there' });
  });
});

/** The compactions that folded steps into the digest. */
const folds = (events: readonly AgentEvent[]) => events.filter((event) => event.type === 'history-compacted' && event.steps > 0);

describe("a run's own instruction, after earlier turns", () => {
  /** A window small enough that results too small to be moved out (8 lines of log) fill it in a few dozen steps. */
  const SMALL_WINDOW = 16_000;
  const EARLIER: NonNullable<RunAgentOptions['messages']> = [
    { role: 'user', content: 'Is the night log readable?' },
    { role: 'assistant', content: [{ type: 'text', text: 'Yes, read_log answers it.' }] },
    { role: 'user', content: 'Good. Keep it open.' },
    { role: 'assistant', content: [{ type: 'text', text: 'It is open.' }] },
  ];
  /** Longer than the 240 characters a digest keeps of a message, with its end the part a digest would cut. */
  const PROMPT = `Read the night log eight lines at a time, ${'note every ERROR line with its id and user, '.repeat(12)}and end with the words OWN-INSTRUCTION-END.`;
  /** The prompt as it stands inside a request body (JSON-escaped). */
  const inBody = JSON.stringify(PROMPT).slice(1, -1);

  /** A fake model that reads 8 lines of the log `times` times, then answers. */
  const reader = (times: number) => {
    let calls = 0;
    return startFakeLlmServer(
      () =>
        ++calls <= times ? { kind: 'turn', toolCalls: [{ name: 'big__read_log', args: { lines: 8, needle_at: calls } }] } : { kind: 'turn', text: 'read' },
      { contextWindow: SMALL_WINDOW },
    );
  };
  const settings = (baseURL: string) => ({
    pool,
    prompt: PROMPT,
    model: 'openai:gpt-4.1-mini',
    providers: { openai: { apiKey: KEY, baseURL } },
    contextWindows: { 'openai:gpt-4.1-mini': SMALL_WINDOW },
    budget: { maxSteps: 200 },
  });
  it('is sent whole in every request, after compactions folded its earlier steps, and after a resume from a compacted checkpoint', async () => {
    const first = await reader(60);
    const events: AgentEvent[] = [];
    const checkpoints: AgentCheckpoint[] = [];
    try {
      const result = await runAgent({
        ...settings(first.openaiBaseUrl),
        messages: EARLIER,
        onEvent: (event) => void events.push(event),
        onCheckpoint: (checkpoint) => void checkpoints.push(checkpoint),
      });
      expect(result).toMatchObject({ finishReason: 'stop', finalText: 'read' });
      expect(folds(events).length).toBeGreaterThan(0);
      const folded = first.requests.filter((request) => request.body.includes('Klym folded earlier steps'));
      expect(folded.length).toBeGreaterThan(0);
      expect(first.requests.filter((request) => !request.body.includes(inBody)).length, 'requests without the prompt whole').toBe(0);
    } finally {
      await first.close();
    }

    // Resumed from a checkpoint that holds a digest, in a fresh run: the prompt is found again, and kept again.
    const compacted = checkpoints.findLast((checkpoint) => JSON.stringify(checkpoint.messages).includes('Klym folded earlier steps')) as AgentCheckpoint;
    expect(compacted).toBeDefined();
    const second = await reader(40);
    const resumedEvents: AgentEvent[] = [];
    try {
      const resumed = await runAgent({
        ...settings(second.openaiBaseUrl),
        resume: JSON.parse(JSON.stringify(compacted)) as AgentCheckpoint,
        onEvent: (event) => void resumedEvents.push(event),
      });
      expect(resumed).toMatchObject({ finishReason: 'stop', finalText: 'read' });
      expect(folds(resumedEvents).length).toBeGreaterThan(0);
      expect(second.requests.filter((request) => !request.body.includes(inBody)).length, 'requests without the prompt whole').toBe(0);
    } finally {
      await second.close();
    }
  });
});
