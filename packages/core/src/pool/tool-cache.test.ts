import type { Tool } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { ToolCache } from './tool-cache.ts';

const tool = (name: string): Tool => ({ name, inputSchema: { type: 'object' } });

/** A cache over listings the test answers one by one. */
function scripted(): { cache: ToolCache; listings: number; answer(tools: readonly Tool[]): void; fail(error: Error): void } {
  const pending: { resolve(tools: readonly Tool[]): void; reject(error: Error): void }[] = [];
  const state = {
    listings: 0,
    cache: new ToolCache(
      () =>
        new Promise<readonly Tool[]>((resolve, reject) => {
          state.listings++;
          pending.push({ resolve, reject });
        }),
    ),
    answer: (tools: readonly Tool[]) => pending.shift()?.resolve(tools),
    fail: (error: Error) => pending.shift()?.reject(error),
  };
  return state;
}

describe('ToolCache', () => {
  it('waits for the first listing, shared by every caller', async () => {
    const state = scripted();
    const first = state.cache.get();
    const second = state.cache.get();
    state.answer([tool('a')]);
    expect(await first).toEqual([tool('a')]);
    expect(await second).toEqual([tool('a')]);
    expect(state.listings).toBe(1);
  });

  it('serves the last good list at once while a refresh is due, and the new one once it is in', async () => {
    const state = scripted();
    const first = state.cache.get();
    state.answer([tool('a')]);
    await first;
    state.cache.invalidate();
    expect(await state.cache.get()).toEqual([tool('a')]);
    expect(state.listings).toBe(2);
    state.answer([tool('a'), tool('b')]);
    await Promise.resolve();
    expect(await state.cache.get()).toEqual([tool('a'), tool('b')]);
    expect(state.listings).toBe(2);
  });

  it('keeps the last good list when a refresh fails, and tries again at the next get', async () => {
    const state = scripted();
    const first = state.cache.get();
    state.answer([tool('a')]);
    await first;
    state.cache.invalidate();
    const refreshing = state.cache.refresh();
    state.fail(new Error('no session came free'));
    await expect(refreshing).rejects.toThrow('no session came free');
    expect(await state.cache.get()).toEqual([tool('a')]);
    expect(state.listings).toBe(3);
  });

  it('stays due when the list changed while it was being listed; `fresh` then waits for a listing', async () => {
    const state = scripted();
    const first = state.cache.get();
    state.cache.invalidate();
    state.answer([tool('a')]);
    await first;
    expect(state.cache.serves()).toBe(true);
    expect(state.cache.serves({ fresh: true })).toBe(false);
    const fresh = state.cache.get({ fresh: true });
    state.answer([tool('b')]);
    expect(await fresh).toEqual([tool('b')]);
    expect(state.cache.serves({ fresh: true })).toBe(true);
  });
});
