// Scenario 10's figures of one run, as its children (`heavy-child.ts`, `heavy-graph-child.ts`) report them: read
// from the run's events (a library run's `onEvent`, or a task's log entries as `{ type, ...data }`).

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
  /** The process's peak RSS (the kernel's `maxRSS`) less its RSS before the run, in MiB. */
  readonly peakGrowthMiB: number;
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
  run: { readonly runMs: number; readonly peakGrowthMiB: number; readonly answer: string; readonly finishReason: string; readonly totalTokens?: number },
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

/** Peak RSS growth since `rssBefore`, in MiB: the kernel's peak, as a timer would miss what a synchronous parse holds. */
export const peakGrowthMiB = (rssBefore: number): number => (process.resourceUsage().maxRSS * 1024 - rssBefore) / 2 ** 20;
