import { describe, expect, it } from 'vitest';
import { isKlymError } from '../errors.ts';
import type { TaskInput } from '../tasks/store/task-types.ts';
import { DECLINED_ANSWER, DECLINED_REASON, elicitationOf, inputKeyOf, replyOfElicitation, takesFormElicitation } from './task-input.ts';

const question: TaskInput = { question: 'Which service?', toolCallId: 'call-1', askedAt: '2026-01-01T00:00:00.000Z' };
const approval: TaskInput = {
  kind: 'approval',
  question: 'Approve the call of grynya__write_node with {"id":"n1"}?',
  call: { toolName: 'grynya__write_node', input: { id: 'n1' } },
  toolCallId: 'call-2',
  askedAt: '2026-01-01T00:01:00.000Z',
};

const refusal = (run: () => unknown): string => {
  try {
    run();
  } catch (error) {
    if (isKlymError(error, 'INVALID_ARGUMENT')) return error.message;
    throw error;
  }
  throw new Error('Expected INVALID_ARGUMENT');
};

describe('the elicitation of an ask, and the reply its result gives', () => {
  it('asks a question for a string answer, and an approval for approve and reason with a message naming the call', () => {
    expect(elicitationOf(question)).toMatchObject({ mode: 'form', message: 'Which service?', requestedSchema: { required: ['answer'] } });
    const asked = elicitationOf(approval);
    expect(asked.message).toBe('Approve the call of grynya__write_node with {"id":"n1"}?');
    expect(elicitationOf({ ...approval, question: 'May I write?' }).message).toBe('grynya__write_node: May I write?');
    expect(asked.requestedSchema.properties).toMatchObject({ approve: { type: 'boolean' }, reason: { type: 'string' } });
    expect(asked.requestedSchema.required).toEqual(['approve']);
    expect(inputKeyOf(approval)).not.toBe(inputKeyOf({ ...approval, askedAt: '2026-01-01T00:02:00.000Z' }));
  });

  it('turns accept into the reply, decline into a denial or a declined answer, and cancel into nothing', () => {
    expect(replyOfElicitation(question, { action: 'accept', content: { answer: 'billing' } })).toEqual({ answer: 'billing' });
    expect(replyOfElicitation(approval, { action: 'accept', content: { approve: false, reason: 'not today' } })).toEqual({
      approve: false,
      reason: 'not today',
    });
    expect(replyOfElicitation(approval, { action: 'accept', content: { approve: true } })).toEqual({ approve: true });
    expect(replyOfElicitation(approval, { action: 'decline' })).toEqual({ approve: false, reason: DECLINED_REASON });
    expect(replyOfElicitation(question, { action: 'decline' })).toEqual({ answer: DECLINED_ANSWER });
    expect(replyOfElicitation(question, { action: 'cancel' })).toBeUndefined();
    expect(replyOfElicitation(approval, { action: 'cancel' })).toBeUndefined();
  });

  it('refuses a result that does not fit the ask, naming what is wrong', () => {
    expect(refusal(() => replyOfElicitation(question, { action: 'accept', content: { approve: true } }))).toMatch(
      /A question takes `answer` \(a string\).*got none/,
    );
    expect(refusal(() => replyOfElicitation(approval, { action: 'accept', content: { answer: 'yes' } }))).toMatch(
      /approval of grynya__write_node takes `approve` \(a boolean\).*got none/,
    );
    expect(refusal(() => replyOfElicitation(approval, { action: 'accept', content: { approve: 'yes' } }))).toMatch(/got string "yes"/);
    expect(refusal(() => replyOfElicitation(question, { action: 'maybe' }))).toMatch(/accept, decline or cancel, got string "maybe"/);
  });

  it('sends a form only to a client that takes one', () => {
    expect(takesFormElicitation(undefined)).toBe(false);
    expect(takesFormElicitation({})).toBe(false);
    expect(takesFormElicitation({ elicitation: {} })).toBe(true);
    expect(takesFormElicitation({ elicitation: { form: {} } })).toBe(true);
    expect(takesFormElicitation({ elicitation: { url: {} } })).toBe(false);
  });
});
