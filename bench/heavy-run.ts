// Scenario 10's figures of one run, as its children (`heavy-child.ts`, `heavy-graph-child.ts`) report them: read
// from the run's events (a library run's `onEvent`, or a task's log entries as `{ type, ...data }`), and the
// memory of the process group (`watchGroup`): the serving process and its query processes, read from /proc.
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

/** The fields of the events a heavy run's figures come from (a task's log entries have the same data). */
export interface RunEvent {
  readonly type: string;
  readonly toolName?: string;
  readonly durationMs?: number;
  readonly elapsedMs?: number;
  readonly code?: string;
  readonly message?: string;
  readonly artifact?: { readonly bytes?: number; readonly tokens?: number };
  readonly chunks?: number;
}

/** What a child prints, as one JSON line. */
export interface RunFigures {
  /** Start to end of the run (the task), in milliseconds. */
  readonly runMs: number;
  /** The serving process's peak RSS (the kernel's high-water mark) less its RSS before the run, in MiB. */
  readonly peakGrowthMiB: number;
  /** The process group's memory during the run (`watchGroup`). */
  readonly group: GroupPeak;
  /** The first artifact kept: the input, in bytes of its lines. */
  readonly artifactBytes: number;
  /** Chunks `klym__map_artifact` answered on; 0 without a map. */
  readonly chunks: number;
  /** The map call's duration, in milliseconds; 0 without one. */
  readonly mapMs: number;
  /** The first `klym__query_artifact` call's duration (loading its tables included), in milliseconds; 0 without one. */
  readonly queryMs: number;
  /** Of which the DuckDB's own time (loading its tables, then the query), as its `artifact-query` event says; the rest is opening the DuckDB and the tool's own work. */
  readonly queryDuckDbMs: number;
  /** Failed tool calls, as `tool: message`. */
  readonly toolErrors: readonly string[];
  /** The run's final answer. */
  readonly answer: string;
  readonly finishReason: string;
  /** Tokens the run spent, its map's calls included, as the provider reported them; a library run's only. */
  readonly totalTokens?: number;
}

const durationOf = (events: readonly RunEvent[], toolName: string): number =>
  events.find((event) => event.type === 'tool-result' && event.toolName === toolName)?.durationMs ?? 0;

/** A run's figures from its events, its times and its answer. */
export function runFigures(
  events: readonly RunEvent[],
  run: {
    readonly runMs: number;
    readonly peakGrowthMiB: number;
    readonly group: GroupPeak;
    readonly answer: string;
    readonly finishReason: string;
    readonly totalTokens?: number;
  },
): RunFigures {
  return {
    ...run,
    artifactBytes: events.find((event) => event.type === 'artifact-kept')?.artifact?.bytes ?? 0,
    chunks: events.find((event) => event.type === 'artifact-map')?.chunks ?? 0,
    mapMs: durationOf(events, 'klym__map_artifact'),
    queryMs: durationOf(events, 'klym__query_artifact'),
    queryDuckDbMs: events.find((event) => event.type === 'artifact-query')?.elapsedMs ?? 0,
    toolErrors: events
      .filter((event) => event.type === 'tool-error')
      .map((event) => `${event.toolName ?? '?'}: ${(event.message ?? event.code ?? '').slice(0, 200)}`),
  };
}

/** The resident memory of this process, in bytes, as /proc counts it: `VmRSS`, or with `peak` the high-water mark `VmHWM`. */
export function residentBytes(peak = false): number {
  const kb = new RegExp(`^${peak ? 'VmHWM' : 'VmRSS'}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'latin1'))?.[1];
  return Number(kb) * 1024;
}

/**
 * This process's RSS now, after a full collection, with its high-water mark reset to it (`clear_refs` 5, Linux
 * 4.0 on), so that {@link peakGrowthMiB} sees the run's peak and not an earlier one (loading modules).
 */
export function rssBeforeRun(): number {
  globalThis.gc?.();
  writeFileSync('/proc/self/clear_refs', '5');
  return residentBytes();
}

/** Peak RSS growth since `rssBefore`, in MiB: the kernel's peak, as a timer would miss what a synchronous parse holds. */
export const peakGrowthMiB = (rssBefore: number): number => (residentBytes(true) - rssBefore) / 2 ** 20;

/** The process group's memory at its peak: this (serving) process and its query processes, in MiB. */
export interface GroupPeak {
  /** The group's peak resident memory (the serving process's and its query processes' at one instant), less the serving process's before the run. */
  readonly growthMiB: number;
  /** At that instant: the serving process's share of the growth, and the query processes' resident memory. */
  readonly servingMiB: number;
  readonly queryProcessesMiB: number;
  /** The query processes' own peak (their sum at one instant), whenever it came. */
  readonly queryPeakMiB: number;
  /** Query processes seen. */
  readonly queryProcesses: number;
}

/**
 * Samples the memory of this process and its query processes (children whose command line names
 * `query-process`; an upstream's process is not Klym's) every 5 ms, on a thread of its own so that a synchronous
 * parse on the main thread does not stop it. Made before taking `rssBefore` (its thread is then not growth), and
started after it.
 */
export async function watchGroup(): Promise<{ start(): void; stop(rssBefore: number): Promise<GroupPeak> }> {
  const worker = new Worker(SAMPLER, { eval: true, workerData: { pid: process.pid } });
  await once(worker, 'message');
  return {
    // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
    start: () => worker.postMessage('start'),
    async stop(rssBefore) {
      const { promise, resolve } = Promise.withResolvers<{ sum: number; serving: number; query: number; queryPeak: number; seen: number }>();
      worker.once('message', resolve);
      // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
      worker.postMessage('stop');
      const peak = await promise;
      await worker.terminate();
      return {
        growthMiB: mib(peak.sum - rssBefore),
        servingMiB: mib(peak.serving - rssBefore),
        queryProcessesMiB: mib(peak.query),
        queryPeakMiB: mib(peak.queryPeak),
        queryProcesses: peak.seen,
      };
    },
  };
}

const mib = (bytes: number): number => bytes / 2 ** 20;

const SAMPLER = `
const { parentPort, workerData } = require('node:worker_threads');
const { readFileSync, readdirSync } = require('node:fs');
const { pid } = workerData;
const read = (file) => { try { return readFileSync(file, 'latin1'); } catch { return ''; } };
const rss = (of) => Number(/^VmRSS:\\s+(\\d+) kB/m.exec(read('/proc/' + of + '/status'))?.[1] ?? 0) * 1024;
// Only a yes is kept: a child read between its fork and its exec still has this process's command line.
const known = new Set();
const isQueryProcess = (child) => {
  if (!known.has(child) && read('/proc/' + child + '/cmdline').includes('query-process')) known.add(child);
  return known.has(child);
};
const children = () => {
  const found = [];
  for (const task of readdirSync('/proc/' + pid + '/task')) found.push(...read('/proc/' + pid + '/task/' + task + '/children').split(' ').filter((text) => text.trim() !== ''));
  return found.filter(isQueryProcess);
};
const peak = { sum: 0, serving: 0, query: 0, queryPeak: 0, seen: 0 };
parentPort.postMessage('ready');
const seen = new Set();
const sample = () => {
  const serving = rss(pid);
  let query = 0;
  for (const child of children()) {
    seen.add(child);
    query += rss(child);
  }
  if (serving + query > peak.sum) Object.assign(peak, { sum: serving + query, serving, query });
  peak.queryPeak = Math.max(peak.queryPeak, query);
};
let timer;
parentPort.on('message', (message) => {
  if (message === 'start') {
    timer = setInterval(sample, 5);
    return sample();
  }
  clearInterval(timer);
  sample();
  parentPort.postMessage({ ...peak, seen: seen.size });
});
`;
