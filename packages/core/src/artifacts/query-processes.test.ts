// Query processes die for real here: stopped with SIGSTOP so that no interrupt reaches DuckDB, killed with
// SIGKILL from outside. The query they held fails saying why; the next gets a fresh process.
import { describe, expect, it } from 'vitest';
import { createArtifactQuery, createQueryProcesses } from './artifact-query.ts';
import { createMemoryArtifacts } from './artifact-store.ts';

const FOREVER = 'SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3';

/** Resolves once `processes` has a process, with its id. */
async function firstPid(processes: { pids(): number[] }): Promise<number> {
  await expect.poll(() => processes.pids().length, { timeout: 10_000 }).toBeGreaterThan(0);
  return processes.pids()[0] as number;
}

describe('query processes', () => {
  it('kills a process whose query does not stop when interrupted past timeoutMs, and answers the next query in a fresh one', async () => {
    await using processes = createQueryProcesses({ processes: 1, maxConcurrent: 1, memoryMiB: 256, threads: 1 });
    await using duck = createArtifactQuery({ source: createMemoryArtifacts(), processes, timeoutMs: 1_500 });
    expect((await duck.query('SELECT 1')).rows).toEqual([[1]]);
    const pid = await firstPid(processes);
    const stuck = duck.query(FOREVER).catch((error: unknown) => error);
    // Stopped, the process hears no interrupt: only a kill ends its query.
    process.kill(pid, 'SIGSTOP');
    expect(await stuck).toMatchObject({ code: 'QUERY_FAILED', message: expect.stringContaining('time limit of 1,500 ms (`timeoutMs`)') });
    expect(() => process.kill(pid, 0)).toThrow('ESRCH');
    expect((await duck.query('SELECT 2')).rows).toEqual([[2]]);
    expect(processes.pids()).not.toContain(pid);
  });

  it('fails the query of a process killed from outside, naming the signal, and goes on', async () => {
    await using processes = createQueryProcesses({ processes: 1, maxConcurrent: 1, memoryMiB: 256, threads: 1 });
    await using duck = createArtifactQuery({ source: createMemoryArtifacts(), processes, timeoutMs: 60_000 });
    await duck.query('SELECT 1');
    const pid = await firstPid(processes);
    const running = duck.query(FOREVER).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(pid, 'SIGKILL');
    expect(await running).toMatchObject({ code: 'QUERY_FAILED', message: expect.stringContaining('process ended while it ran (SIGKILL)') });
    expect((await duck.query('SELECT 3')).rows).toEqual([[3]]);
  });

  it('runs maxConcurrent queries of different tasks in one process at once, and a retried one alone after a kill', async () => {
    await using processes = createQueryProcesses({ processes: 1, maxConcurrent: 2, memoryMiB: 256, threads: 1 });
    const source = createMemoryArtifacts();
    await using first = createArtifactQuery({ source, processes, timeoutMs: 60_000 });
    await using second = createArtifactQuery({ source, processes, timeoutMs: 60_000 });
    await first.query('SELECT 1');
    const pid = await firstPid(processes);
    // Both run in the one process; killing it from outside leaves no query to blame, so each is tried again alone.
    const controller = new AbortController();
    const long = first.query(FOREVER, { signal: controller.signal }).catch((error: unknown) => error);
    // About a second of work: it is under way when the process dies.
    const short = second.query('SELECT count(*) FROM range(300000000) a WHERE a.range % 7 = 3').catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(pid, 'SIGKILL');
    // The long one, if it goes first, holds its new process alone until it is cancelled; then the other runs.
    setTimeout(() => controller.abort(), 3_000);
    expect(await short).toMatchObject({ rows: [[Math.floor((300_000_000 - 1 - 3) / 7) + 1]] });
    expect(await long).toMatchObject({ code: 'ABORTED' });
  });
});
