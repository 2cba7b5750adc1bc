import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { KlymError } from '../errors.ts';
import { INTERRUPTED_CALL_MESSAGE, createCheckpointer, resumeFrom } from './checkpoint.ts';
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
