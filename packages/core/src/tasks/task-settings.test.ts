import { describe, expect, it } from 'vitest';
import { TASK_DEFAULTS } from '../defaults.ts';
import { resolveTaskSettings } from './task-settings.ts';

describe('resolveTaskSettings', () => {
  it('applies every default once, the write-back settings included', () => {
    expect(resolveTaskSettings({}, false)).toEqual({
      maxConcurrent: TASK_DEFAULTS.concurrency,
      maxQueued: TASK_DEFAULTS.maxQueued,
      taskTimeoutMs: TASK_DEFAULTS.timeoutMs,
      ttlMs: TASK_DEFAULTS.ttlMs,
      inputTimeoutMs: TASK_DEFAULTS.inputTimeoutMs,
      resumeOnRestart: TASK_DEFAULTS.resumeOnRestart,
      askCaller: TASK_DEFAULTS.askCaller,
      writeBack: { upstream: 'grynya', byDefault: false, timeZone: 'UTC', timeoutMs: TASK_DEFAULTS.writeBackTimeoutMs },
    });
    expect(resolveTaskSettings({ writeBack: { byDefault: true, upstream: 'graph' } }, false).writeBack).toMatchObject({ byDefault: true, upstream: 'graph' });
  });

  it('lets a front of a shared queue run nothing, and refuses a limit that is not positive, naming it', () => {
    expect(resolveTaskSettings({ maxConcurrent: 0 }, true).maxConcurrent).toBe(0);
    expect(() => resolveTaskSettings({ maxConcurrent: 0 }, false)).toThrow('Expected `maxConcurrent` to be a positive number, got 0');
    expect(() => resolveTaskSettings({ maxConcurrent: -1 }, true)).toThrow('Expected `maxConcurrent` to be a number of at least 0, got -1');
    expect(() => resolveTaskSettings({ ttlMs: 0 }, false)).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: 'Expected `ttlMs` to be a positive number, got 0' }),
    );
  });
});
