import { tool, zodSchema, type ToolSet } from 'ai';
import { z } from 'zod';
import type { AgentUsage } from '../agent/types.ts';
import { addUsage, ZERO_USAGE } from '../agent/usage.ts';
import { ARTIFACT_DEFAULTS, CODE_DEFAULTS } from '../defaults.ts';
import { isKlymError, KlymError } from '../errors.ts';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import { resultText } from '../tools/tool-result.ts';
import { keepBigResult, type ResultKeeping } from '../artifacts/result-keeping.ts';
import { callTool, sql } from './host-calls.ts';
import { createReplay, INTERRUPTED_HOST_CALL_MESSAGE, type HostCallRecord, type ProgramRecorder, type RecordedHostCall } from './program-record.ts';
import { runInSandbox, type HostFunction } from './sandbox.ts';
import { budgetStop, createSubCalls } from './sub-calls.ts';

/** The name of Klym's built-in tool that runs a program over the run's tools and artifacts. */
export const CODE_TOOL_NAME = `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}run_code`;

/** The host functions a program awaits, by the names programs (and the tests of other agents) rely on. */
export type HostFunctionName = 'callTool' | 'sql' | 'read' | 'grep' | 'llm' | 'llmMap' | 'log';

/** Limits of one `klym__run_code` program (the config's `code` section). */
export interface CodeLimits {
  /** The program's heap, in MiB. @default CODE_DEFAULTS.memoryMiB (64) */
  readonly memoryMiB?: number;
  /** Wall-clock limit of one program, its host calls included, in milliseconds. @default CODE_DEFAULTS.timeoutMs (60,000) */
  readonly timeoutMs?: number;
  /** Rows one `sql()` may answer; a bigger answer fails the call, saying so. @default CODE_DEFAULTS.maxRows (10,000) */
  readonly maxRows?: number;
}

/** What a program does, as the run's events tell it (the run adds the step). */
export type CodeEvent =
  | {
      readonly type: 'code-start';
      readonly toolCallId: string;
      readonly code: string;
      /** Set when the program runs again after a restart interrupted it, its recorded calls replayed. */
      readonly replay?: true;
    }
  | {
      readonly type: 'code-call';
      readonly toolCallId: string;
      /** The program's host call number, from 1. */
      readonly call: number;
      readonly name: HostFunctionName;
      /** The upstream tool of a `callTool`, the artifact of a `read` or `grep`. */
      readonly target?: string;
      readonly durationMs: number;
      /** Bytes of the answer as JSON the program was given (0 for a failure). */
      readonly bytes: number;
      /** What the sub-calls of an `llm` or `llmMap` spent (in the run's usage already, counted as each ended). */
      readonly usage?: AgentUsage;
      /** Set when the answer (or error) came from the task's record of the program's earlier run, not sent again. */
      readonly replayed?: true;
      readonly error?: string;
    }
  | { readonly type: 'code-log'; readonly toolCallId: string; readonly text: string }
  | {
      readonly type: 'code-end';
      readonly toolCallId: string;
      readonly calls: number;
      readonly elapsedMs: number;
      /** Bytes of the answer as the program returned it; absent when it failed. */
      readonly bytes?: number;
      readonly error?: string;
    };

/** What `klym__run_code` runs programs over. */
export interface CodeRunning {
  readonly limits?: CodeLimits;
  /** The run's upstream tools, under its rules and policies (a denied one throws `TOOL_DENIED`), not kept as artifacts. */
  readonly tools: ToolSet;
  /** How the run keeps big results, reads, greps and queries its artifacts, and makes sub-calls (`keeping.mapping`). */
  readonly keeping: ResultKeeping;
  readonly onEvent?: (event: CodeEvent) => void;
  /** Whether an upstream tool is read-only; one it does not know counts as a tool that writes. @default none is */
  readonly readOnly?: (toolName: string) => boolean;
  /** Why the run's budget cannot pay for another call, in words; `undefined` while it can. Asked before each call. */
  readonly budgetSpent?: () => string | undefined;
  /** Where the programs' host calls are recorded as they happen, for a resume to replay. */
  readonly recorder?: ProgramRecorder;
}

const CODE_INPUT = zodSchema(
  z.strictObject({
    code: z
      .string()
      .min(1)
      .max(100_000)
      .describe('The body of an async JavaScript function: await the host functions, `return` the answer (JSON-able, or a string).'),
  }),
);

/** Characters of a value a `log()` line holds at most; the rest is cut. */
const LOG_CHARS = 2_000;

/** An error the program's earlier run was given, given again from the record (its message as it was; not recorded twice). */
class ReplayedError extends Error {}

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** One run of a program: its call, its source, the signal of its run, and, re-run after a crash, its record. */
export interface ProgramRun {
  readonly toolCallId: string;
  readonly code: string;
  readonly signal?: AbortSignal;
  /** The host calls its interrupted run recorded: replayed while the program makes the same calls. */
  readonly replay?: readonly HostCallRecord[];
}

/**
 * `klym__run_code { code }`: runs a program the model wrote in a sandbox (see `runInSandbox`) over the run's
 * tools and artifacts, with host functions `callTool(name, args)`, `sql(query)`, `read(artifact, { offset, limit })`,
 * `grep(artifact, pattern)`, `llm(instruction, text)`, `llmMap(instruction, texts)` and `log(...values)`. Every host
 * call is a `code-call` event; the source is in `code-start`; the answer is bounded like a tool result (a big one is
 * kept as an artifact). A program that fails, or passes a limit, fails this call only (`CODE_FAILED`, naming the
 * limit); a spent budget stops it (`BUDGET_EXCEEDED`, "The budget stopped the program: …").
 */
export function codeTool(running: CodeRunning): ToolSet[string] {
  const limits = limitsOf(running);
  return tool({
    description:
      'Runs JavaScript (an async function body; `return` the answer) in a sandbox over your tools and artifacts; only what it returns ' +
      'reaches you. Use it for many dependent calls, aggregation over results, or the same work per item; for one or two calls, ' +
      'call the tools directly. Awaited host functions: `callTool(name, args)` → `{ text, json, artifact }` ' +
      `(same rules as your calls; a failure throws), \`sql(query)\` → rows as objects (at most ${limits.maxRows}), \`read(artifact, { offset, limit })\`, ` +
      "`grep(artifact, pattern)`, `llm(instruction, text)` → a sub-model's answer, `llmMap(instruction, texts)` → answers, " +
      `\`log(...values)\`. No require, fetch, timers or clock. Limits: ${limits.memoryMiB} MiB, ${limits.timeoutMs} ms. ` +
      'Return a compact answer, not raw results.',
    inputSchema: CODE_INPUT,
    execute: async ({ code }, { toolCallId, abortSignal }) => {
      await running.recorder?.started(toolCallId, code);
      return runProgram(running, { toolCallId, code, ...(abortSignal === undefined ? {} : { signal: abortSignal }) });
    },
  });
}

function limitsOf(running: CodeRunning): Required<CodeLimits> {
  return {
    memoryMiB: running.limits?.memoryMiB ?? CODE_DEFAULTS.memoryMiB,
    timeoutMs: running.limits?.timeoutMs ?? CODE_DEFAULTS.timeoutMs,
    maxRows: running.limits?.maxRows ?? CODE_DEFAULTS.maxRows,
  };
}

const noSubCalls = async (): Promise<never> => {
  throw new KlymError('INVALID_ARGUMENT', 'This run has no model for sub-calls');
};

/**
 * Runs one program to its tool result's text (see {@link codeTool}); a resumed run calls it for a program a crash
 * interrupted, with `run.replay`: a call recorded with its outcome is answered from the record (a write is never
 * sent twice), a write sent with no outcome recorded fails with {@link INTERRUPTED_HOST_CALL_MESSAGE}, and a
 * read-only call or sub-call with none is made again.
 * @throws {KlymError} as {@link codeTool}'s call fails
 */
export async function runProgram(running: CodeRunning, run: ProgramRun): Promise<string> {
  const limits = limitsOf(running);
  const { keeping, recorder } = running;
  const { toolCallId, code } = run;
  const emit = (event: CodeEvent): void => running.onEvent?.(event);
  emit({ type: 'code-start', toolCallId, code, ...(run.replay === undefined ? {} : { replay: true as const }) });
  // Host calls end with the program: a call still waiting when it stopped is aborted. A spent budget stops it with its reason.
  const program = new AbortController();
  const stop = new AbortController();
  const signal = AbortSignal.any([...(run.signal === undefined ? [] : [run.signal]), program.signal, stop.signal]);
  const replay = createReplay(run.replay);
  const readOnly = running.readOnly ?? (() => false);
  const subCalls = keeping.mapping === undefined ? undefined : createSubCalls(keeping.mapping, signal);
  const started = performance.now();
  let calls = 0;
  const counted =
    (name: HostFunctionName, work: (args: readonly unknown[], spend: (used: AgentUsage) => void, call: number) => Promise<unknown>): HostFunction =>
    async (args) => {
      const call = ++calls;
      let spent: AgentUsage | undefined;
      const begun = performance.now();
      const target = name !== 'log' && name !== 'sql' && !name.startsWith('llm') && typeof args[0] === 'string' ? args[0] : undefined;
      const record = (bytes: number, error?: unknown, replayed?: true): void =>
        emit({
          type: 'code-call',
          toolCallId,
          call,
          name,
          ...(target === undefined ? {} : { target }),
          durationMs: Math.round(performance.now() - begun),
          bytes,
          ...(spent === undefined ? {} : { usage: spent }),
          ...(replayed === undefined ? {} : { replayed }),
          ...(error === undefined ? {} : { error: errorMessage(error) }),
        });
      const recorded = name === 'callTool' || name === 'llm' || name === 'llmMap' ? (name as RecordedHostCall) : undefined;
      const entry =
        recorded === undefined
          ? undefined
          : { call, name: recorded, ...(target === undefined ? {} : { target }), args: recorded === 'callTool' ? (args[1] ?? {}) : args };
      const writes = entry?.name === 'callTool' && !readOnly(entry.target ?? '');
      // A write's outcome is stored at once; a read's or a sub-call's may wait for the next save (a crash costs making it again).
      const outcomeSaved = writes ? 'now' : 'soon';
      try {
        if (entry !== undefined) {
          const found = replay.find(call, entry.name, entry.target, entry.args);
          if (found?.outcome !== undefined) {
            if ('error' in found.outcome) {
              record(0, found.outcome.error, true);
              throw new ReplayedError(found.outcome.error);
            }
            record(found.outcome.value === undefined ? 0 : Buffer.byteLength(JSON.stringify(found.outcome.value)), undefined, true);
            return found.outcome.value;
          }
          if (found !== undefined && writes) {
            await recorder?.hostCall(toolCallId, { ...entry, outcome: { error: INTERRUPTED_HOST_CALL_MESSAGE } }, 'now');
            const error = new KlymError('TASK_INTERRUPTED', INTERRUPTED_HOST_CALL_MESSAGE);
            record(0, error, true);
            throw error;
          }
          const refused = running.budgetSpent?.();
          if (refused !== undefined) throw budgetStop(refused);
          // A write is recorded before it is sent: after a crash, its record says it may have taken effect.
          if (writes) await recorder?.hostCall(toolCallId, entry, 'before-call');
        }
        const value = await work(args, (used) => (spent = addUsage(spent ?? ZERO_USAGE, used)), call);
        if (entry !== undefined) void recorder?.hostCall(toolCallId, { ...entry, outcome: { value } }, outcomeSaved);
        record(value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value)));
        return value;
      } catch (error) {
        if (isKlymError(error, 'BUDGET_EXCEEDED')) stop.abort(error);
        // A call cut off by the program's end or its run's cancel has no outcome to record.
        else if (entry !== undefined && !signal.aborted && !isKlymError(error, 'TASK_INTERRUPTED') && !(error instanceof ReplayedError))
          void recorder?.hostCall(toolCallId, { ...entry, outcome: { error: errorMessage(error) } }, outcomeSaved);
        if (!(error instanceof ReplayedError) && !isKlymError(error, 'TASK_INTERRUPTED')) record(0, error);
        throw error;
      }
    };
  const host: Record<HostFunctionName, HostFunction> = {
    // Each upstream call's id is the program's call's and its number: calls awaited together stay apart.
    callTool: counted('callTool', async ([name, args], _spend, call) => callTool(running, String(name), args ?? {}, `${toolCallId}.${call}`, signal)),
    sql: counted('sql', async ([query]) => sql(running, String(query), limits.maxRows, signal)),
    read: counted('read', async ([artifact, range]) => {
      const { offset, limit } = (range ?? {}) as { offset?: number; limit?: number };
      const slice = await keeping.artifacts.read(String(artifact), {
        ...(typeof offset === 'number' ? { offset } : {}),
        ...(typeof limit === 'number' ? { limit } : {}),
      });
      return {
        lines: slice.lines.map(({ n, text, fromChar }) => ({ n, text, ...(fromChar === undefined ? {} : { fromChar }) })),
        next: slice.next ?? null,
      };
    }),
    grep: counted('grep', async ([artifact, pattern]) => {
      const found = await keeping.artifacts.grep(String(artifact), String(pattern), { maxMatches: ARTIFACT_DEFAULTS.maxGrepMatches });
      return { total: found.total, matches: found.matches.map(({ line, text }) => ({ line, text })) };
    }),
    llm: counted('llm', async ([instruction, text], spend) => (subCalls === undefined ? noSubCalls() : subCalls.llm(instruction, text, spend))),
    llmMap: counted('llmMap', async ([instruction, texts], spend) => (subCalls === undefined ? noSubCalls() : subCalls.llmMap(instruction, texts, spend))),
    log: counted('log', async (values) => {
      const text = values.map((value) => (typeof value === 'string' ? value : JSON.stringify(value))).join(' ');
      emit({ type: 'code-log', toolCallId, text: text.length > LOG_CHARS ? `${text.slice(0, LOG_CHARS)}…` : text });
      return undefined;
    }),
  };
  try {
    const answer = await runInSandbox({
      code,
      host,
      memoryMiB: limits.memoryMiB,
      timeoutMs: limits.timeoutMs,
      signal: AbortSignal.any([...(run.signal === undefined ? [] : [run.signal]), stop.signal]),
    });
    const text = answer === undefined ? `The program returned nothing (${calls} host calls).` : answer.text;
    emit({ type: 'code-end', toolCallId, calls, elapsedMs: Math.round(performance.now() - started), bytes: Buffer.byteLength(text) });
    return resultText(await keepBigResult(CODE_TOOL_NAME, { content: [{ type: 'text', text }] }, keeping));
  } catch (error) {
    emit({ type: 'code-end', toolCallId, calls, elapsedMs: Math.round(performance.now() - started), error: errorMessage(error) });
    throw error;
  } finally {
    program.abort();
  }
}
