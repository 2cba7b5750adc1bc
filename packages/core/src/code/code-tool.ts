import type { CallToolResult } from '@modelcontextprotocol/client';
import { asSchema, tool, zodSchema, type ToolSet } from 'ai';
import { z } from 'zod';
import { ARTIFACT_DEFAULTS, CODE_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import { resultText } from '../tools/tool-result.ts';
import { toRecords } from '../artifacts/artifact-query.ts';
import { keepBigResult, keepResult, type ResultKeeping } from '../artifacts/artifact-tools.ts';
import { runInSandbox, type HostFunction } from './sandbox.ts';

/** The name of Klym's built-in tool that runs a program over the run's tools and artifacts. */
export const CODE_TOOL_NAME = `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}run_code`;

/** The host functions a program awaits, by the names programs (and the tests of other agents) rely on. */
export type HostFunctionName = 'callTool' | 'sql' | 'read' | 'grep' | 'log';

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
  | { readonly type: 'code-start'; readonly toolCallId: string; readonly code: string }
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
  /** How the run keeps big results, reads, greps and queries its artifacts. */
  readonly keeping: ResultKeeping;
  readonly onEvent?: (event: CodeEvent) => void;
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
/** Characters of rows as JSON one `sql()` may bring into the program. */
const SQL_PAGE_CHARS = 8_000_000;

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * `klym__run_code { code }`: runs a program the model wrote in a sandbox (see `runInSandbox`) over the run's
 * tools and artifacts, with host functions `callTool(name, args)`, `sql(query)`, `read(artifact, { offset, limit })`,
 * `grep(artifact, pattern)` and `log(...values)`. Every host call is a `code-call` event; the source is in
 * `code-start`; the answer is bounded like a tool result (a big one is kept as an artifact). A program that
 * fails, or passes a limit, fails this call only (`CODE_FAILED`, naming the limit).
 */
export function codeTool(running: CodeRunning): ToolSet[string] {
  const limits = {
    memoryMiB: running.limits?.memoryMiB ?? CODE_DEFAULTS.memoryMiB,
    timeoutMs: running.limits?.timeoutMs ?? CODE_DEFAULTS.timeoutMs,
    maxRows: running.limits?.maxRows ?? CODE_DEFAULTS.maxRows,
  };
  const { keeping } = running;
  const emit = (event: CodeEvent): void => running.onEvent?.(event);
  return tool({
    description:
      'Runs JavaScript (an async function body; `return` the answer) in a sandbox over your tools and artifacts; only what it returns ' +
      'reaches you. Use it when a job needs many dependent calls, aggregation over results, or the same work per item (200 calls, one ' +
      'step); for one or two calls, call the tools directly. Awaited host functions: `callTool(name, args)` → `{ text, json, artifact }` ' +
      `(same rules as your calls; a failure throws), \`sql(query)\` → rows as objects (at most ${limits.maxRows}), \`read(artifact, { offset, limit })\`, ` +
      `\`grep(artifact, pattern)\`, \`log(...values)\`. No require, fetch, timers or clock. Limits: ${limits.memoryMiB} MiB, ${limits.timeoutMs} ms. ` +
      'Return a compact answer, not raw results.',
    inputSchema: CODE_INPUT,
    execute: async ({ code }, { toolCallId, abortSignal }) => {
      emit({ type: 'code-start', toolCallId, code });
      // Host calls end with the program: a call still waiting when it stopped is aborted.
      const program = new AbortController();
      const signal = abortSignal === undefined ? program.signal : AbortSignal.any([abortSignal, program.signal]);
      const started = performance.now();
      let calls = 0;
      const counted =
        (name: HostFunctionName, work: (args: readonly unknown[]) => Promise<{ value: unknown; target?: string }>): HostFunction =>
        async (args) => {
          const call = ++calls;
          const begun = performance.now();
          const target = name !== 'log' && name !== 'sql' && typeof args[0] === 'string' ? args[0] : undefined;
          const record = (bytes: number, error?: unknown): void =>
            emit({
              type: 'code-call',
              toolCallId,
              call,
              name,
              ...(target === undefined ? {} : { target }),
              durationMs: Math.round(performance.now() - begun),
              bytes,
              ...(error === undefined ? {} : { error: errorMessage(error) }),
            });
          try {
            const { value } = await work(args);
            record(value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value)));
            return value;
          } catch (error) {
            record(0, error);
            throw error;
          }
        };
      const host: Record<HostFunctionName, HostFunction> = {
        callTool: counted('callTool', async ([name, args]) => ({ value: await callTool(running, String(name), args ?? {}, `${toolCallId}.${calls}`, signal) })),
        sql: counted('sql', async ([query]) => ({ value: await sql(running, String(query), limits.maxRows, signal) })),
        read: counted('read', async ([artifact, range]) => {
          const { offset, limit } = (range ?? {}) as { offset?: number; limit?: number };
          const slice = await keeping.artifacts.read(String(artifact), {
            ...(typeof offset === 'number' ? { offset } : {}),
            ...(typeof limit === 'number' ? { limit } : {}),
          });
          return {
            value: {
              lines: slice.lines.map(({ n, text, fromChar }) => ({ n, text, ...(fromChar === undefined ? {} : { fromChar }) })),
              next: slice.next ?? null,
            },
          };
        }),
        grep: counted('grep', async ([artifact, pattern]) => {
          const found = await keeping.artifacts.grep(String(artifact), String(pattern), { maxMatches: ARTIFACT_DEFAULTS.maxGrepMatches });
          return { value: { total: found.total, matches: found.matches.map(({ line, text }) => ({ line, text })) } };
        }),
        log: counted('log', async (values) => {
          const text = values.map((value) => (typeof value === 'string' ? value : JSON.stringify(value))).join(' ');
          emit({ type: 'code-log', toolCallId, text: text.length > LOG_CHARS ? `${text.slice(0, LOG_CHARS)}…` : text });
          return { value: undefined };
        }),
      };
      try {
        const answer = await runInSandbox({ code, host, memoryMiB: limits.memoryMiB, timeoutMs: limits.timeoutMs, signal: abortSignal ?? program.signal });
        const text = answer === undefined ? `The program returned nothing (${calls} host calls).` : answer.text;
        emit({ type: 'code-end', toolCallId, calls, elapsedMs: Math.round(performance.now() - started), bytes: Buffer.byteLength(text) });
        return resultText(await keepBigResult(CODE_TOOL_NAME, { content: [{ type: 'text', text }] }, keeping));
      } catch (error) {
        emit({ type: 'code-end', toolCallId, calls, elapsedMs: Math.round(performance.now() - started), error: errorMessage(error) });
        throw error;
      } finally {
        program.abort();
      }
    },
  });
}

/** One upstream tool call of a program, through the run's tool set: its arguments checked, its big result kept. */
async function callTool(running: CodeRunning, name: string, args: unknown, toolCallId: string, signal: AbortSignal): Promise<unknown> {
  const target = name.startsWith(`${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}`) ? undefined : running.tools[name];
  if (target?.execute === undefined) {
    throw new KlymError('TOOL_NOT_FOUND', `No tool ${name} here: callTool takes an upstream tool by its name as you see it (e.g. grynya__query_graph)`);
  }
  const checked = await asSchema(target.inputSchema).validate?.(args);
  if (checked !== undefined && !checked.success) throw new KlymError('INVALID_ARGUMENT', `Invalid arguments for ${name}: ${checked.error.message}`);
  // The catalog's tools are dynamic: their input is whatever passed the check above.
  const execute = target.execute as unknown as (
    input: unknown,
    options: { toolCallId: string; messages: []; abortSignal: AbortSignal },
  ) => Promise<CallToolResult>;
  const result = await execute(args, { toolCallId, messages: [], abortSignal: signal });
  const text = (running.keeping.resultText ?? resultText)(result);
  if (result.isError === true) throw new KlymError('UPSTREAM_ERROR', `${name} answered with an error: ${text}`, { toolName: name });
  const kept = await keepResult(name, result, running.keeping);
  if (kept.artifact !== undefined) return { text: resultText(kept.result), json: null, artifact: kept.artifact.id };
  return { text, json: jsonOf(text), artifact: null };
}

/** The JSON value a tool's text is, or null. */
function jsonOf(text: string): unknown {
  const start = text.trimStart()[0];
  if (start !== '{' && start !== '[') return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A program's query: every row as an object, or a failure saying there were too many to bring in. */
async function sql(running: CodeRunning, query: string, maxRows: number, signal: AbortSignal): Promise<unknown> {
  const querying = running.keeping.query;
  if (querying === undefined) throw new KlymError('QUERY_FAILED', 'This run has no SQL over its artifacts');
  const found = await querying.query(query, { pageChars: SQL_PAGE_CHARS, signal });
  running.keeping.onQueried?.({ sql: query, answer: found });
  if (!found.rowCountExact || found.rowCount > maxRows || found.rows.length < found.rowCount) {
    throw new KlymError(
      'QUERY_FAILED',
      `The query answered ${found.rowCountExact ? '' : 'more than '}${found.rowCount} rows, more than a program takes (code.maxRows is ${maxRows}, or ${SQL_PAGE_CHARS} characters): aggregate, filter, or page with LIMIT and OFFSET`,
      { limit: maxRows },
    );
  }
  return toRecords(found);
}
