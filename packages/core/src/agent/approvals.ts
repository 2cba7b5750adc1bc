import type { CallToolResult } from '@modelcontextprotocol/client';
import type { ModelMessage, ToolSet } from 'ai';
import { isKlymError } from '../errors.ts';
import { previewOf, resultText as plainResultText, toModelOutput, type ToolResultOutput } from '../tools/tool-result.ts';
import type { AgentEvent } from './agent-event.ts';
import { nextApproval, type AskedQuestion } from './ask-caller.ts';
import { resumeFrom, type Checkpointer } from './checkpoint.ts';
import type { AgentCheckpoint, AgentToolCall, InFlightToolCall } from './types.ts';

/**
 * `tools` as the model is offered them when a run can wait for approvals: each tool that `needsApproval` without
 * its `execute`, so that the AI SDK ends the step with its call unanswered and the run parks on it (`parkedStep`).
 */
export function offeredTools(tools: ToolSet, needsApproval: (toolName: string) => boolean): ToolSet {
  const offered: ToolSet = {};
  for (const [name, tool] of Object.entries(tools)) {
    if (!needsApproval(name)) {
      offered[name] = tool;
      continue;
    }
    const { execute: _sentOnceApproved, ...definition } = tool;
    offered[name] = definition as ToolSet[string];
  }
  return offered;
}

/** A checkpoint taken during a step. */
type InStep = AgentCheckpoint & { readonly current: NonNullable<AgentCheckpoint['current']> };

/** Whether a resumed checkpoint's step has calls its caller decided on (or still has to). */
export function awaitsCaller(checkpoint: AgentCheckpoint | undefined): checkpoint is InStep {
  return checkpoint?.current?.calls.some((call) => call.approval !== undefined && call.output === undefined) ?? false;
}

/** The ids of the approved calls of a checkpoint's step not yet sent. */
export function approvedCalls(checkpoint: AgentCheckpoint | undefined): Set<string> {
  return new Set(checkpoint?.current?.calls.flatMap((call) => (call.approval === 'approved' && call.output === undefined ? [call.toolCallId] : [])));
}

/** What sending the approved calls of a resumed step needs. */
export interface ApprovedSending {
  /** The run's tools, each with its `execute` (the approved calls pass its `approved` hook). */
  readonly tools: ToolSet;
  readonly emit: (event: AgentEvent) => void;
  /** Reopened on the parked step: records each call as sent, then answered. */
  readonly progress: Checkpointer;
  readonly signal: AbortSignal;
  readonly resultText?: (result: CallToolResult) => string;
}

/**
 * Sends, in order, the calls of `calls` the caller approved, through the run's own tools (its rules, its
 * record before sending, its keeping of big results), each with its `tool-result` or `tool-error` event. Answers their
 * records, each with its result or its error as the model reads it.
 */
async function sendApproved(step: number, calls: readonly InFlightToolCall[], sending: ApprovedSending): Promise<AgentToolCall[]> {
  const { emit } = sending;
  const made: AgentToolCall[] = [];
  for (const call of calls) {
    if (call.approval !== 'approved' || call.output !== undefined) continue;
    const { toolCallId, toolName, input: args } = call;
    // Its `tool-call` event was told when the model made it: what follows is its outcome.
    const started = performance.now();
    const tool = sending.tools[toolName];
    let output: ToolResultOutput;
    try {
      if (tool?.execute === undefined) throw new Error(`Tool ${toolName} is no longer offered to this run: the approved call was not sent`);
      const execute = tool.execute as unknown as (
        input: unknown,
        options: { toolCallId: string; messages: []; abortSignal: AbortSignal },
      ) => Promise<CallToolResult>;
      const result = await execute(args, { toolCallId, messages: [], abortSignal: sending.signal });
      const text = (sending.resultText ?? plainResultText)(result);
      output = toModelOutput(result, text);
      const durationMs = Math.round(performance.now() - started);
      const isError = result.isError === true;
      const preview = previewOf(text);
      emit({ type: 'tool-result', step, toolCallId, toolName, durationMs, isError, preview });
      made.push({ step, toolCallId, toolName, args, ok: !isError, durationMs, ...(isError ? { error: preview } : {}) });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const durationMs = Math.round(performance.now() - started);
      output = { type: 'error-text', value: message };
      emit({ type: 'tool-error', step, toolCallId, toolName, durationMs, code: isKlymError(error) ? error.code : 'INTERNAL', message });
      made.push({ step, toolCallId, toolName, args, ok: false, durationMs, error: message });
    }
    sending.progress.answered(toolCallId, output);
  }
  return made;
}

/**
 * Goes on with a resumed checkpoint's parked step: reopens it, sends its approved calls ({@link sendApproved}),
 * then parks again on its next call to approve (`asked`, the checkpoint saved), or ends the step (`messages`: the
 * conversation to go on from). `made`: the calls sent. An abort meanwhile is the caller's to see on its signal.
 */
export async function continueParkedStep(
  resume: InStep,
  sending: ApprovedSending,
): Promise<{ readonly asked?: AskedQuestion; readonly messages: ModelMessage[]; readonly made: AgentToolCall[] }> {
  const { current, elapsedMs: _elapsed, ...completed } = resume;
  const { progress } = sending;
  progress.reopen({ ...completed, current });
  const made = await sendApproved(current.step, current.calls, sending);
  const settled = progress.snapshot();
  const calls = settled.current?.calls ?? [];
  const asked = nextApproval(calls);
  if (asked !== undefined) {
    await progress.park({ ...completed, current: { ...current, calls } });
    return { asked, messages: [], made };
  }
  const { messages, texts, toolCalls } = resumeFrom(settled);
  if (!sending.signal.aborted) progress.endStep({ steps: completed.steps, messages, texts, usage: completed.usage, toolCalls });
  return { messages, made };
}
