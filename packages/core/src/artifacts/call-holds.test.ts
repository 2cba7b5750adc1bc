import { describe, expect, it } from 'vitest';
import type { AgentUsage } from '../agent/types.ts';
import { createCallHolds, type Reserve } from './call-holds.ts';

const most = (totalTokens: number): AgentUsage => ({ inputTokens: totalTokens, outputTokens: 0, totalTokens, estimated: true });

/** A budget of `tokens`, held by what is under way. */
function budget(tokens: number): Reserve & { held: () => number } {
  let held = 0;
  const reserve = (usage: AgentUsage) => {
    if (held + usage.totalTokens > tokens) return { reason: `${held} of ${tokens} tokens held` };
    held += usage.totalTokens;
    return { release: () => void (held -= usage.totalTokens) };
  };
  return Object.assign(reserve, { held: () => held });
}

describe('createCallHolds', () => {
  it('makes a call the budget cannot pay for yet wait for one under way to end, and gives each hold back once', async () => {
    const tokens = budget(100);
    const holds = createCallHolds(tokens);
    const first = await holds.hold(most(80), () => true);
    if (first === undefined || 'reason' in first) throw new Error('the first call was not held');
    let second: unknown;
    const waiting = holds.hold(most(50), () => true).then((held) => (second = held));
    await Promise.resolve();
    expect(second).toBeUndefined();
    first.release();
    first.release();
    await waiting;
    expect(second).toHaveProperty('release');
    expect(tokens.held()).toBe(50);
  });

  it('says why when the budget cannot pay and no call is under way, and gives up when told', async () => {
    const holds = createCallHolds(budget(10));
    await expect(holds.hold(most(50), () => true)).resolves.toEqual({ reason: '0 of 10 tokens held' });
    await expect(holds.hold(most(5), () => false)).resolves.toBeUndefined();
  });
});
