import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { compactHistory, type Compaction } from './compaction.ts';

/** A task longer than a digest line keeps (240 characters): folded, it would be cut. */
const PROMPT = `Count the nodes of each label in the graph, then ${'list every label with its count, '.repeat(30)}and say which label has the most.`;

/** What a caller passes as `messages`: turns of an earlier run, its answers included. */
const EARLIER: ModelMessage[] = [
  { role: 'user', content: 'Which labels are in the graph?' },
  { role: 'assistant', content: [{ type: 'text', text: 'Person, Company and City.' }] },
  { role: 'user', content: 'And how are they related?' },
  { role: 'assistant', content: [{ type: 'text', text: 'People work at companies in cities.' }] },
];

/** A step: one tool call and its result, under the size that is moved out to an artifact. */
function step(n: number): ModelMessage[] {
  const toolCallId = `call-${n}`;
  return [
    {
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId, toolName: 'grynya__query_graph', input: { query: `MATCH (n) RETURN n SKIP ${n * 100} LIMIT 100` } }],
    },
    { role: 'tool', content: [{ type: 'tool-result', toolCallId, toolName: 'grynya__query_graph', output: { type: 'text', value: `row ${n}\n`.repeat(90) } }] },
  ];
}

const measure = (messages: readonly ModelMessage[]): number => Math.ceil(JSON.stringify(messages).length / 4);

const compaction = (budgetTokens: number): Compaction => ({
  budgetTokens,
  keepSteps: 2,
  measure,
  keep: () => Promise.reject(new Error('no result here is big enough to be moved out')),
});

describe('compactHistory', () => {
  it("keeps everything up to and including the run's prompt when earlier turns come before it, and folds only the run's own steps", async () => {
    const messages = [...EARLIER, { role: 'user', content: PROMPT } as ModelMessage, ...[1, 2, 3, 4, 5, 6].flatMap(step)];
    const compacted = await compactHistory(messages, compaction(Math.floor(measure(messages) / 2)));

    expect(compacted?.steps).toBeGreaterThan(0);
    const out = compacted?.messages ?? [];
    expect(out.slice(0, EARLIER.length + 1)).toEqual([...EARLIER, { role: 'user', content: PROMPT }]);
    expect(out[EARLIER.length + 1]).toMatchObject({ role: 'user', content: expect.stringMatching(/^\[Klym folded earlier steps/) });
    expect(out[EARLIER.length + 1]?.content).not.toContain('Count the nodes');
    expect(out.slice(-4)).toEqual([5, 6].flatMap(step));
  });

  it('keeps the prompt through compactions that continue its digest, as a resumed run meets them', async () => {
    let messages: ModelMessage[] = [...EARLIER, { role: 'user', content: PROMPT }, ...[1, 2, 3, 4].flatMap(step)];
    const budget = measure(messages);
    let folds = 0;
    for (let n = 5; n <= 12; n++) {
      // What a checkpoint keeps is what the run goes on from: a JSON copy, with no index or object identity.
      messages = JSON.parse(JSON.stringify([...messages, ...step(n)])) as ModelMessage[];
      const compacted = await compactHistory(messages, compaction(budget));
      if (compacted === undefined) continue;
      folds++;
      messages = compacted.messages;
      expect(messages.slice(0, EARLIER.length + 1)).toEqual([...EARLIER, { role: 'user', content: PROMPT }]);
      expect(
        messages.filter((message) => message.role === 'user' && typeof message.content === 'string' && message.content.startsWith('[Klym folded')),
      ).toHaveLength(1);
    }
    expect(folds).toBeGreaterThan(1);
  });

  it('keeps a task without earlier turns, and folds from its first step as before', async () => {
    const messages: ModelMessage[] = [{ role: 'user', content: PROMPT }, ...[1, 2, 3, 4, 5, 6].flatMap(step)];
    const compacted = await compactHistory(messages, compaction(Math.floor(measure(messages) / 2)));
    expect(compacted?.messages[0]).toEqual({ role: 'user', content: PROMPT });
    expect(compacted?.messages[1]).toMatchObject({ role: 'user', content: expect.stringMatching(/^\[Klym folded earlier steps/) });
    expect(compacted?.steps).toBeGreaterThan(0);
  });
});
