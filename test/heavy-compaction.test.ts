// Issue #27, the conversation stays inside the window: a run of many steps whose results are each
// under the artifact threshold, but together many times the window, over a real stdio upstream. Before each
// step the older results are moved out to artifacts, then older steps folded into a digest; the run never
// sends more than the window, still reads what it moved out, and resumes from a compacted checkpoint.
import path from 'node:path';
import { ARTIFACT_DEFAULTS, createScriptedModel, createSessionPool, runAgent, type AgentCheckpoint, type AgentEvent, type SessionPool } from '@klym/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigLog } from './support/big-log-server.ts';

const STEPS = 50;
/** Lines of each step's result: ~29,000 characters, just under the artifact threshold; 50 of them are over 4× the window. */
const LINES = 320;
const RESULT_CHARS = bigLog(LINES, 1).length;

let pool: SessionPool;
beforeAll(async () => {
  pool = await createSessionPool({ upstreams: { big: { command: process.execPath, args: ['--conditions=klym-source', path.join(import.meta.dirname, 'support', 'big-log-server.ts')] } } });
});
afterAll(() => pool.close({ drainTimeoutMs: 100 }));

/** A model that reads the log `upTo` times, then stops. */
const reads = (upTo: number) =>
  createScriptedModel({ steps: ({ call }) => (call <= upTo ? { toolCalls: [{ toolName: 'big__read_log', args: { lines: LINES, needle_at: call } }] } : { text: 'stopped' }) });

/** The conversation a model call was sent, in characters of JSON: what its window must hold. */
const promptChars = (prompt: unknown): number => JSON.stringify(prompt).length;

describe('the conversation stays inside the window', () => {
  it(`runs ${STEPS} steps of medium results without ever sending more than the window, and still reads what it moved out`, async () => {
    const sent: number[] = [];
    let movedOut: string | undefined;
    const model = createScriptedModel({
      steps: ({ call, options }) => {
        sent.push(promptChars(options.prompt));
        const prompt = JSON.stringify(options.prompt);
        movedOut ??= /artifact (art_[0-9a-f]{12}): [^"]*moved out of the conversation/.exec(prompt)?.[1];
        if (call <= STEPS) return { toolCalls: [{ toolName: 'big__read_log', args: { lines: LINES, needle_at: call } }] };
        // Past the last read: the first result moved out is still there to read.
        if (call === STEPS + 1) return { toolCalls: [{ toolName: 'klym__grep_artifact', args: { artifact: movedOut ?? 'none', pattern: 'FATAL' } }] };
        return { text: /1 of its 320 lines match/.test(prompt) ? 'read it back' : 'lost it' };
      },
    });
    const events: AgentEvent[] = [];
    const result = await runAgent({ pool, prompt: 'Read the log many times.', model, budget: { maxSteps: STEPS + 5 }, onEvent: (event) => events.push(event) });

    expect(result).toMatchObject({ finishReason: 'stop', text: 'read it back', steps: STEPS + 2 });
    // Characters of JSON at 2.5 characters a token: never past the window.
    expect(Math.max(...sent)).toBeLessThan(ARTIFACT_DEFAULTS.contextWindow * 2.5);
    const compactions = events.filter((event) => event.type === 'history-compacted');
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions.some((event) => event.results > 0)).toBe(true);
    expect(compactions.every((event) => event.tokensAfter < event.tokensBefore)).toBe(true);
    // Each result stayed in the conversation (under the artifact threshold); without compaction the run would have sent 4× the window.
    expect(RESULT_CHARS / 2.5).toBeLessThan(ARTIFACT_DEFAULTS.thresholdShare * ARTIFACT_DEFAULTS.contextWindow);
    expect(STEPS * RESULT_CHARS).toBeGreaterThan(4 * ARTIFACT_DEFAULTS.contextWindow * 2.5);
  });

  it('resumes from a checkpoint taken after a compaction, and reads the artifacts it moved out', async () => {
    const checkpoints: AgentCheckpoint[] = [];
    const artifacts = new Map<string, { id: string; text: string }>();
    const backend = {
      save: async (artifact: { id: string; text: string }) => void artifacts.set(artifact.id, artifact),
      load: async (id: string) => artifacts.get(id) as never,
      list: async () => [...artifacts.values()] as never[],
    };
    await runAgent({ pool, prompt: 'Read the log many times.', model: reads(30), budget: { maxSteps: 40 }, artifacts: backend, onCheckpoint: (checkpoint) => void checkpoints.push(checkpoint) });
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
          /1 of its 320 lines match/.test(JSON.stringify(options.prompt)) ? { text: 'still there' } : { toolCalls: [{ toolName: 'klym__grep_artifact', args: { artifact: moved, pattern: 'FATAL' } }] },
      }),
    });
    expect(resumed).toMatchObject({ finishReason: 'stop', finalText: 'still there' });
  });
});
