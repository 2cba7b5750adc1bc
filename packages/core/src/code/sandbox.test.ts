import { describe, expect, it } from 'vitest';
import { KlymError } from '../errors.ts';
import { runInSandbox, type HostFunction } from './sandbox.ts';

const limits = { memoryMiB: 16, timeoutMs: 2_000 };
const run = (code: string, host: Record<string, HostFunction> = {}, more: { signal?: AbortSignal; timeoutMs?: number } = {}) =>
  runInSandbox({ code, host, ...limits, ...more });

describe('runInSandbox', () => {
  it('answers what the program returns: a string as text, anything else as JSON, after awaited host calls', async () => {
    const host = { double: async ([value]: readonly unknown[]) => Number(value) * 2 };
    await expect(run('let sum = 0; for (let i = 1; i <= 100; i++) sum += await double(i); return { sum };', host)).resolves.toEqual({
      kind: 'json',
      text: '{"sum":10100}',
    });
    await expect(run('return "plain"')).resolves.toEqual({ kind: 'text', text: 'plain' });
    await expect(run('const x = 1;')).resolves.toBeUndefined();
  });

  it('hands a host failure to the program as an error it can catch', async () => {
    const host = { fail: async () => Promise.reject(new Error('refused by policy')) };
    await expect(run('try { await fail(); return "no" } catch (error) { return "caught: " + error.message }', host)).resolves.toEqual({
      kind: 'text',
      text: 'caught: refused by policy',
    });
  });

  it('fails a program that throws or does not parse, saying why', async () => {
    await expect(run('throw new TypeError("bad input")')).rejects.toThrow('The program failed: TypeError: bad input');
    await expect(run('return (')).rejects.toThrow(/The program failed: SyntaxError/);
  });

  it('stops a program that loops forever at its time limit, naming code.timeoutMs', async () => {
    const started = performance.now();
    await expect(run('try { for (;;) {} } catch { return "escaped" }', {}, { timeoutMs: 300 })).rejects.toThrow(
      'The program ran past its time limit: code.timeoutMs is 300 ms',
    );
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('stops a program that waits past its time limit on a host call', async () => {
    const host = { hang: () => new Promise<never>(() => {}) };
    await expect(run('await hang(); return 1', host, { timeoutMs: 200 })).rejects.toThrow('code.timeoutMs is 200 ms');
  });

  it('fails a program that allocates past its memory, naming code.memoryMiB', async () => {
    await expect(run('const parts = []; for (let i = 0; ; i++) parts.push({ i, text: "item " + i });')).rejects.toThrow(
      'The program ran out of memory: code.memoryMiB is 16 MiB',
    );
  });

  it('is interrupted when its signal aborts, between host calls', async () => {
    const controller = new AbortController();
    let calls = 0;
    const host = {
      tick: async () => {
        if (++calls === 5) controller.abort();
        await new Promise((resolve) => setTimeout(resolve, 1));
      },
    };
    await expect(run('for (;;) await tick();', host, { signal: controller.signal })).rejects.toMatchObject({ code: 'ABORTED' });
    expect(calls).toBe(5);
  });

  it("is interrupted while it computes when its signal aborts, with a spent budget's own reason", async () => {
    const controller = new AbortController();
    const host = { started: async () => void setTimeout(() => controller.abort(), 50) };
    await expect(run('await started(); for (;;) {}', host, { signal: controller.signal, timeoutMs: 60_000 })).rejects.toMatchObject({ code: 'ABORTED' });
    const budget = new AbortController();
    const spent = new KlymError('BUDGET_EXCEEDED', 'The budget stopped the program: spent');
    const stop = { started: async () => void setTimeout(() => budget.abort(spent), 50) };
    await expect(run('await started(); for (;;) {}', stop, { signal: budget.signal, timeoutMs: 60_000 })).rejects.toBe(spent);
  });

  it('has no clock, file system, network or process', async () => {
    await expect(run('return [typeof require, typeof process, typeof fetch, typeof setTimeout].join()')).resolves.toEqual({
      kind: 'text',
      text: 'undefined,undefined,undefined,undefined',
    });
    await expect(run('return Date.now()')).rejects.toThrow('There is no clock in the sandbox');
    await expect(run('return new Date()')).rejects.toThrow('There is no clock in the sandbox');
    await expect(run('return new Date("2024-01-02T00:00:00Z").getUTCDate()')).resolves.toEqual({ kind: 'json', text: '2' });
  });
});
