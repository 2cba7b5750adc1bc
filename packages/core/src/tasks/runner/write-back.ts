import { clipText } from '../../internal/clip-text.ts';
import type { SessionPool } from '../../pool/session-pool.ts';
import { traceToolCall, type ToolCallTracing } from '../../telemetry/tool-call-span.ts';
import type { WriteBackOutcome } from '../store/task-types.ts';
import { TASK_DEFAULTS } from '../../defaults.ts';

/** Where and how a task's result is written into the graph. */
export interface WriteBackOptions {
  /** The upstream that serves `add_node` (grynya-mcp-server). @default 'grynya' */
  readonly upstream?: string;
  /** Write results of tasks whose request does not say (`record_result`). @default false */
  readonly byDefault?: boolean;
  /** The time zone whose calendar date names the day node (`d_YYYY_MM_DD`). @default 'UTC' */
  readonly timeZone?: string;
  /** Time limit of the `add_node` call. @default TASK_DEFAULTS.writeBackTimeoutMs (30_000) */
  readonly timeoutMs?: number;
}

/** {@link WriteBackOptions} with every default applied, resolved once by the task manager. */
export type ResolvedWriteBack = Required<WriteBackOptions>;

/** `options` with its defaults: upstream `grynya`, not by default, the UTC calendar, `TASK_DEFAULTS.writeBackTimeoutMs`. */
export function resolveWriteBack(options: WriteBackOptions = {}): ResolvedWriteBack {
  return {
    upstream: options.upstream ?? 'grynya',
    byDefault: options.byDefault ?? false,
    timeZone: options.timeZone ?? 'UTC',
    timeoutMs: options.timeoutMs ?? TASK_DEFAULTS.writeBackTimeoutMs,
  };
}

/** Where a written result came from: what was asked, by whom, of which model, and how the run ended. */
export interface WriteBackProvenance {
  /** The task's prompt; the node keeps its first {@link PROMPT_PROVENANCE_CHARS} characters. */
  readonly prompt: string;
  /** The model that answered, `provider:model`. */
  readonly model: string;
  /** Who started the task. */
  readonly principal: string;
  /** How the run ended: `stop`, `length`, `budget:<name>`, … */
  readonly finishReason: string;
}

/** How much of the prompt an `Analysis` node keeps. */
export const PROMPT_PROVENANCE_CHARS = 500;

/** The day node's id for `time`: `d_YYYY_MM_DD` in `timeZone`. */
export function dayIdOf(time: Date, timeZone = 'UTC'): string {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(time);
  const part = (type: string): string => parts.find((item) => item.type === type)?.value ?? '00';
  return `d_${part('year')}_${part('month')}_${part('day')}`;
}

/**
 * Writes a task's result as an `Analysis` node linked to its day, through grynya's `add_node`: `node_data`
 * holds `id`, `full_text` and `time`, and with `provenance` also `prompt` (cut), `model`, `principal`,
 * `finish_reason` and `partial` (true when a budget ended the run, so the text may be unfinished) — flat
 * strings and booleans, as graph properties must be. The write succeeded only if the reply's JSON `status`
 * is `success` (grynya never sets `isError`). Never throws: a failure is the outcome's `error`.
 */
export async function writeBackResult(
  pool: SessionPool,
  task: { readonly id: string; readonly text: string; readonly time: Date; readonly provenance?: WriteBackProvenance },
  options: ResolvedWriteBack,
  tracing?: ToolCallTracing,
): Promise<WriteBackOutcome> {
  const nodeId = `klym_${task.id}`;
  const time = task.time.toISOString();
  const dayId = dayIdOf(task.time, options.timeZone);
  const base = { nodeId, dayId };
  const { provenance } = task;
  const origin =
    provenance === undefined
      ? {}
      : {
          prompt: clipText(provenance.prompt, PROMPT_PROVENANCE_CHARS),
          model: provenance.model,
          principal: provenance.principal,
          finish_reason: provenance.finishReason,
          partial: provenance.finishReason.startsWith('budget:'),
        };
  try {
    const { upstream } = options;
    const send = (meta?: Readonly<Record<string, unknown>>) =>
      pool.callTool(
        upstream,
        'add_node',
        { node_type: 'Analysis', node_data: { id: nodeId, full_text: task.text, time, ...origin }, day_id: dayId, time },
        { timeoutMs: options.timeoutMs, ...(meta === undefined ? {} : { meta }) },
      );
    const reply = tracing === undefined ? await send() : await traceToolCall(tracing, { upstream, toolName: 'add_node' }, (meta) => send(meta && { ...meta }));
    const text = reply.content.map((item) => (item.type === 'text' ? item.text : '')).join('');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return { ...base, status: 'failed', error: `add_node answered with no JSON: ${text.slice(0, 200)}` };
    }
    const status = (parsed as { status?: unknown } | null)?.status;
    if (reply.isError !== true && status === 'success') return { ...base, status: 'written' };
    const message = (parsed as { message?: unknown } | null)?.message;
    return { ...base, status: 'failed', error: `add_node answered status "${String(status)}"${typeof message === 'string' ? `: ${message}` : ''}` };
  } catch (error) {
    return { ...base, status: 'failed', error: error instanceof Error ? error.message : String(error) };
  }
}
