import type { TaskInput } from '@klym/core';
import { describe, expect, it } from 'vitest';
import { inputSection } from './task-input.ts';

const render = async (input: TaskInput, mayAnswer: boolean): Promise<string> => String(await inputSection('task_1', input, mayAnswer));

describe('what a waiting task shows on its page', () => {
  it('a question: the question, escaped, and a text box that posts an answer', async () => {
    const page = await render({ question: 'Billing <or> search?', toolCallId: 'c1', askedAt: '2026-03-01T10:00:00.000Z' }, true);
    expect(page).toContain('Waiting for your answer');
    expect(page).toContain('<p class="question">Billing &lt;or&gt; search?</p>');
    expect(page).toContain('action="/dashboard/tasks/task_1/reply"');
    expect(page).toContain('<textarea id="answer" name="answer"');
    expect(page).not.toContain('name="decision"');
  });

  it('an approval: the tool and its arguments whole, Approve and Deny with a reason', async () => {
    const input: TaskInput = {
      kind: 'approval',
      question: 'grynya__add_node with {"id":"n1"}',
      call: { toolName: 'grynya__add_node', input: { id: 'n1', labels: ['Session'] } },
      toolCallId: 'c2',
      askedAt: '2026-03-01T10:00:00.000Z',
    };
    const page = await render(input, true);
    expect(page).toContain('Waiting for your approval');
    expect(page).toContain('<code class="ask-tool">grynya__add_node</code>');
    expect(page).toContain('&quot;labels&quot;: [\n    &quot;Session&quot;\n  ]');
    expect(page).toContain('<button type="submit" name="decision" value="approve">Approve</button>');
    expect(page).toContain('<button type="submit" name="decision" value="deny" class="danger">Deny</button>');
    expect(page).toContain('name="reason"');
    expect(page).not.toContain('name="answer"');
  });

  it('to a viewer who is not the task’s principal: what it waits for, without a form', async () => {
    const page = await render({ question: 'Which one?', toolCallId: 'c1', askedAt: '2026-03-01T10:00:00.000Z' }, false);
    expect(page).toContain('Which one?');
    expect(page).not.toContain('<form');
    expect(page).toContain("Only the task's principal can answer it.");
  });
});
