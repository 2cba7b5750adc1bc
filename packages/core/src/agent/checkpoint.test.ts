import type { ModelMessage } from 'ai';
import { describe, expect, it, vi } from 'vitest';
import { KlymError } from '../errors.ts';
import { HOST_CALL_SAVE_MS, INTERRUPTED_CALL_MESSAGE, createCheckpointer, resumeFrom } from './checkpoint.ts';
import type { AgentCheckpoint } from './types.ts';

const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15, estimated: false };
const unknown = { type: 'error-text', value: INTERRUPTED_CALL_MESSAGE };

describe('resumeFrom', () => {
  it('closes the step under way: recorded results as they came, the others as unknown; the stored conversation stays its prefix', () => {
    const messages: ModelMessage[] = [{ role: 'user', content: 'Do it' }];
    const checkpoint: AgentCheckpoint = {
      steps: 0,
      messages,
      texts: [],
      usage,
      elapsedMs: 10,
      toolCalls: 0,
      current: {
        step: 1,
        text: 'Doing.',
        calls: [
          { toolCallId: 'a', toolName: 'box__read', input: { id: 1 }, output: { type: 'text', value: 'read 1' } },
          { toolCallId: 'b', toolName: 'box__write', input: { id: 2 } },
        ],
      },
    };

    const resumed = resumeFrom(checkpoint);

    expect(resumed.messages[0]).toBe(messages[0]);
    expect(checkpoint.messages).toHaveLength(1);
    expect(resumed.messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Doing.' },
          { type: 'tool-call', toolCallId: 'a', toolName: 'box__read', input: { id: 1 } },
          { type: 'tool-call', toolCallId: 'b', toolName: 'box__write', input: { id: 2 } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'a', toolName: 'box__read', output: { type: 'text', value: 'read 1' } },
          { type: 'tool-result', toolCallId: 'b', toolName: 'box__write', output: unknown },
        ],
      },
    ]);
    expect(resumed).toMatchObject({ texts: ['Doing.'], toolCalls: 2, interruptedCalls: ['b'] });
  });

  it('answers the calls a cut-off last step left without a result, after the results that came; earlier orphans are left alone', () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: 'Do it' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'old', toolName: 'box__read', input: {} }] },
      { role: 'user', content: 'Go on' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'a', toolName: 'box__read', input: {} },
          { type: 'tool-call', toolCallId: 'b', toolName: 'box__write', input: {} },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 'box__read', output: { type: 'text', value: 'ok' } }] },
    ];

    const resumed = resumeFrom({ steps: 2, messages, texts: [], usage, elapsedMs: 0, toolCalls: 3 });

    expect(resumed.messages.slice(0, messages.length)).toEqual(messages);
    expect(resumed.messages.at(-1)).toEqual({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'b', toolName: 'box__write', output: unknown }] });
    expect(resumed).toMatchObject({ toolCalls: 3, interruptedCalls: ['b'] });
  });

  it('changes nothing for a checkpoint taken between steps', () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello.' },
    ];
    expect(resumeFrom({ steps: 1, messages, texts: ['Hello.'], usage, elapsedMs: 0, toolCalls: 0, current: { step: 2, text: 'Hal', calls: [] } })).toEqual({
      messages,
      texts: ['Hello.'],
      toolCalls: 0,
      interruptedCalls: [],
    });
  });
});

describe('createCheckpointer with a store that answers later (a store on another thread)', () => {
  it('holds each call until its record is stored; a record that failed fails its own call unsent, and only that call is forgotten', async () => {
    const saved: AgentCheckpoint[] = [];
    const answers: { resolve(): void; reject(error: Error): void }[] = [];
    const checkpoints = createCheckpointer(
      (checkpoint) => {
        saved.push(checkpoint);
        return new Promise<void>((resolve, reject) => void answers.push({ resolve, reject }));
      },
      () => 0,
    );
    checkpoints.beginStep(1, { steps: 0, messages: [{ role: 'user', content: 'Do it' }], texts: [], usage, toolCalls: 0 });

    const sent: string[] = [];
    const first = checkpoints.sent({ toolCallId: 'a', toolName: 'box__write', input: { id: 1 } })?.then(() => void sent.push('a'));
    const second = checkpoints.sent({ toolCallId: 'b', toolName: 'box__read', input: { id: 2 } })?.then(() => void sent.push('b'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([]);

    answers[1]?.resolve();
    await second;
    expect(sent).toEqual(['b']);
    answers[0]?.reject(new Error('the disk is full'));
    await expect(first).rejects.toThrow(new KlymError('STORE_UNAVAILABLE', 'The call was not sent: its record could not be stored (the disk is full)'));
    expect(sent).toEqual(['b']);

    checkpoints.answered('b', { type: 'text', value: 'read 2' });
    expect(saved.at(-1)?.current?.calls).toEqual([{ toolCallId: 'b', toolName: 'box__read', input: { id: 2 }, output: { type: 'text', value: 'read 2' } }]);
  });
});

/** A checkpointer at step 1 with a program under way, its saves copied into `saved` (or failing while `fail.now`). */
const start = (saved: AgentCheckpoint[], fail = { now: false }) => {
  const checkpoints = createCheckpointer(
    (checkpoint) => {
      if (fail.now) throw new Error('disk full');
      saved.push(structuredClone(checkpoint));
    },
    () => 0,
  );
  checkpoints.beginStep(1, { steps: 0, messages: [{ role: 'user', content: 'Do it' }], texts: [], usage, toolCalls: 0 });
  checkpoints.sent({ toolCallId: 'p', toolName: 'klym__run_code', input: { code: 'return 1' } });
  return checkpoints;
};
const hostCallsOf = (checkpoint: AgentCheckpoint | undefined) => checkpoint?.current?.calls[0]?.hostCalls?.map((call) => call.call);

describe("a program's host calls in the checkpoints", () => {
  it("saves a write before it is sent and its outcome at once; a read's outcome with the next save, or after HOST_CALL_SAVE_MS", () => {
    vi.useFakeTimers();
    try {
      const saved: AgentCheckpoint[] = [];
      const checkpoints = start(saved);
      const read = { call: 1, name: 'callTool' as const, target: 'box__read', args: {}, outcome: { value: { text: 'r' } } };
      checkpoints.hostCall('p', read, 'soon');
      expect(saved).toHaveLength(1);
      vi.advanceTimersByTime(HOST_CALL_SAVE_MS);
      expect(hostCallsOf(saved.at(-1))).toEqual([1]);
      checkpoints.hostCall('p', { ...read, call: 2 }, 'soon');
      const write = { call: 3, name: 'callTool' as const, target: 'box__write', args: { id: 1 } };
      checkpoints.hostCall('p', write, 'before-call');
      // The write's record went with the read's that waited, and nothing is left waiting.
      expect(hostCallsOf(saved.at(-1))).toEqual([1, 2, 3]);
      expect(saved.at(-1)?.current?.calls[0]?.hostCalls?.[2]?.outcome).toBeUndefined();
      checkpoints.hostCall('p', { ...write, outcome: { value: { text: 'w' } } }, 'now');
      expect(saved.at(-1)?.current?.calls[0]?.hostCalls?.[2]?.outcome).toEqual({ value: { text: 'w' } });
      const count = saved.length;
      vi.advanceTimersByTime(HOST_CALL_SAVE_MS * 4);
      expect(saved).toHaveLength(count);
    } finally {
      vi.useRealTimers();
    }
  });

  it('drops the record of a write whose record could not be stored: the write is not sent, and no later checkpoint says it was', () => {
    const saved: AgentCheckpoint[] = [];
    const fail = { now: false };
    const checkpoints = start(saved, fail);
    fail.now = true;
    expect(() => checkpoints.hostCall('p', { call: 1, name: 'callTool', target: 'box__write', args: {} }, 'before-call')).toThrow(
      new KlymError('STORE_UNAVAILABLE', 'The call was not sent: its record could not be stored (disk full)'),
    );
    fail.now = false;
    checkpoints.answered('p', { type: 'text', value: 'done' });
    expect(saved.at(-1)?.current?.calls[0]).toEqual({
      toolCallId: 'p',
      toolName: 'klym__run_code',
      input: { code: 'return 1' },
      hostCalls: [],
      output: { type: 'text', value: 'done' },
    });
  });
});
