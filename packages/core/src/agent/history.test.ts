import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { interruptedStepMessages, removeOrphanedToolCalls } from './history.ts';

const call = (toolCallId: string, providerExecuted?: boolean) => ({
  type: 'tool-call' as const,
  toolCallId,
  toolName: 't',
  input: {},
  ...(providerExecuted ? { providerExecuted } : {}),
});
const result = (toolCallId: string) => ({ type: 'tool-result' as const, toolCallId, toolName: 't', output: { type: 'text' as const, value: 'ok' } });

describe('removeOrphanedToolCalls', () => {
  it('removes calls without a result and results without a call, dropping messages left empty', () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' }, call('answered'), call('lost')] },
      { role: 'tool', content: [result('answered'), result('stray')] },
      { role: 'assistant', content: [call('lost-alone')] },
    ];

    const cleaned = removeOrphanedToolCalls(messages);

    expect(cleaned.removed.toSorted()).toEqual(['lost', 'lost-alone', 'stray']);
    expect(cleaned.messages).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' }, call('answered')] },
      { role: 'tool', content: [result('answered')] },
    ]);
    // The input is left as it was.
    expect(messages).toHaveLength(4);
  });

  it('keeps a sound conversation and calls the provider executed', () => {
    const messages: ModelMessage[] = [
      { role: 'assistant', content: [call('web', true), call('a')] },
      { role: 'tool', content: [result('a')] },
    ];
    expect(removeOrphanedToolCalls(messages)).toEqual({ messages, removed: [] });
  });
});

describe('interruptedStepMessages', () => {
  it('keeps the text and the calls, and the results that came', () => {
    expect(
      interruptedStepMessages('half', [
        { toolCallId: 'a', toolName: 't', input: { q: 1 }, output: { type: 'text', value: 'ok' } },
        { toolCallId: 'b', toolName: 't', input: {} },
      ]),
    ).toEqual([
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'half' },
          { type: 'tool-call', toolCallId: 'a', toolName: 't', input: { q: 1 } },
          { type: 'tool-call', toolCallId: 'b', toolName: 't', input: {} },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 't', output: { type: 'text', value: 'ok' } }] },
    ]);
    expect(interruptedStepMessages('', [])).toEqual([]);
  });
});
