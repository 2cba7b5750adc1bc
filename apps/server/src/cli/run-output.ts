import type { AgentEvent, AgentRunResult, KlymError, UpstreamLogEntry } from '@klym/core';
import { LOG_LEVELS as LEVELS } from '../config/schema.ts';
import type { TextSink } from './cli.ts';

/** Writes an upstream's log message to `sink` as `[upstream level] message`, when it is at least `least` severe. */
export function upstreamLogWriter(sink: TextSink, least: (typeof LEVELS)[number], scrub: (text: string) => string): (entry: UpstreamLogEntry) => void {
  const threshold = LEVELS.indexOf(least);
  return (entry) => {
    if (LEVELS.indexOf(entry.level) < threshold) return;
    sink.write(scrub(`[${entry.upstream} ${entry.level}] ${entry.message.replace(/\s*\n\s*/g, ' ')}\n`));
  };
}

/** Writes live progress of a run to `sink`, one short line per step, tool call and budget: step, tool, tokens so far. */
export function progressWriter(sink: TextSink, scrub: (text: string) => string): (event: AgentEvent) => void {
  let tokens = 0;
  const write = (line: string): void => void sink.write(scrub(`klym · ${line}\n`));
  return (event) => {
    switch (event.type) {
      case 'run-start':
        write(
          `model ${event.model} · ${event.tools.length} tools${event.unavailable.length > 0 ? ` · unavailable: ${event.unavailable.map((item) => item.upstream).join(', ')}` : ''}`,
        );
        break;
      case 'step-start':
        write(`step ${event.step} · thinking · ${tokens} tokens so far`);
        break;
      case 'tool-call':
        write(`step ${event.step} · calling ${event.toolName}`);
        break;
      case 'tool-result':
        write(`step ${event.step} · ${event.toolName} ${event.isError ? 'returned an error' : 'done'} in ${Math.round(event.durationMs)} ms`);
        break;
      case 'tool-error':
        write(`step ${event.step} · ${event.toolName} failed (${event.code}) in ${Math.round(event.durationMs)} ms`);
        break;
      case 'tool-denied':
        write(`step ${event.step} · ${event.toolName} denied by policy ${event.policy}`);
        break;
      case 'step-end':
        // A step's usage is that step's own: the run's so far is their sum.
        tokens += event.usage.totalTokens;
        write(`step ${event.step} · done · ${tokens} tokens so far`);
        break;
      case 'context-shrunk':
        write(`step ${event.step} · too long for the model's window of ${event.window} tokens: ${event.droppedResults} older tool results dropped, sent again`);
        break;
      case 'budget':
        write(`budget ${event.name} reached (${event.used} of ${event.limit})`);
        break;
      case 'run-end':
        write(`finished: ${event.finishReason} · ${event.usage.totalTokens} tokens${event.costUsd === undefined ? '' : ` · $${event.costUsd.toFixed(4)}`}`);
        break;
      default:
        break;
    }
  };
}

/** The JSON `klym run` prints when the run ended (done, on a budget, or cancelled), with the upstreams that were unavailable to it. */
export function resultJson(result: AgentRunResult, unavailable: readonly { readonly upstream: string; readonly error: string }[] = []): string {
  const status = result.finishReason === 'cancelled' ? 'cancelled' : 'completed';
  const { text, finishReason, steps, usage, toolCalls, model, elapsedMs } = result;
  return `${JSON.stringify({ status, text, finishReason, steps, usage, costUsd: result.costUsd ?? null, toolCalls, model, elapsedMs, unavailable }, null, 2)}\n`;
}

/** The JSON `klym run` prints when the run failed. */
export function errorJson(error: KlymError): string {
  return `${JSON.stringify({ status: 'error', error: { code: error.code, message: error.message, ...(error.upstream === undefined ? {} : { upstream: error.upstream }) } }, null, 2)}\n`;
}
