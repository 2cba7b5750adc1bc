import type { ModelMessage, ToolSet } from 'ai';
import { tool, zodSchema } from 'ai';
import { z } from 'zod';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import type { AgentCheckpoint, InFlightToolCall } from './types.ts';

/** The built-in tool a run asks its caller with, when its `askCaller` is on. */
export const ASK_CALLER_TOOL_NAME = `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}ask_caller`;

/** The `finishReason` of a run that stopped to ask its caller (`AgentRunResult.asked` holds the question). */
export const INPUT_REQUIRED = 'input-required';

/**
 * What a run stopped to ask its caller: a question (`klym__ask_caller`), or the approval of a call (`kind:
 * "approval"`, its tool and arguments in `call`). Either way the reply becomes the result of `toolCallId`.
 */
export interface AskedQuestion {
  readonly toolCallId: string;
  /** The question, whole; for an approval, the call in words. */
  readonly question: string;
  /** @default 'question' */
  readonly kind?: 'question' | 'approval';
  /** The call waiting for approval, as the model made it. */
  readonly call?: { readonly toolName: string; readonly input: unknown };
}

/** A reply to what a run asked: an answer, or a decision on a call. */
export type AskReply = { readonly answer: string } | { readonly approved: boolean; readonly reason?: string };

/** What a denied call's result reads. */
export const deniedCallText = (reason: string | undefined): string =>
  `Denied by the caller${reason === undefined || reason.trim() === '' ? ' (no reason given)' : `: ${reason}`}. The call was not sent.`;

/** How much of a call's arguments an approval's question shows (all of them are in its `call`). */
const APPROVAL_INPUT_CHARS = 2_000;

/** The approval of a call, as a question in words. */
export function approvalOf(call: { readonly toolCallId: string; readonly toolName: string; readonly input: unknown }): AskedQuestion {
  const args = JSON.stringify(call.input ?? {});
  const shown = args.length <= APPROVAL_INPUT_CHARS ? args : `${args.slice(0, APPROVAL_INPUT_CHARS)}… (${args.length} characters; whole in the call)`;
  return {
    toolCallId: call.toolCallId,
    kind: 'approval',
    question: `Approve the call of ${call.toolName} with ${shown}?`,
    call: { toolName: call.toolName, input: call.input },
  };
}

/** The first call of `calls` waiting for approval, as the approval to ask for. */
export function nextApproval(calls: readonly InFlightToolCall[]): AskedQuestion | undefined {
  const waiting = calls.find((call) => call.approval === 'waiting' && call.output === undefined);
  return waiting === undefined ? undefined : approvalOf(waiting);
}

// Built once, as the artifact tools are. No `execute`: the SDK ends the step with the call unanswered, and the
// run parks on it (see `parkedStep`); its result is the caller's answer, given when the run is resumed.
const ASK_INPUT = zodSchema(
  z.strictObject({
    question: z.string().min(1).max(10_000).describe('The question, whole: the caller sees nothing of your work but this.'),
  }),
);
const ASK_TOOL = tool({
  description:
    'Ask the caller a question and wait for the answer, which comes back as this tool’s result. Use it only when you cannot go on ' +
    'without it (an ambiguous request, a choice that is theirs to make); the wait may be long. One question per call, one call per step.',
  inputSchema: ASK_INPUT,
});

/** `klym__ask_caller { question }`, for a run whose caller can answer (a task's). */
export function askCallerTools(): ToolSet {
  return { [ASK_CALLER_TOOL_NAME]: ASK_TOOL };
}

/** What a step that asked leaves: the question, and every call of the step as a checkpoint's `current` holds them. */
export interface ParkedStep {
  readonly asked: AskedQuestion;
  readonly calls: readonly InFlightToolCall[];
}

/** What a second ask in one step reads: only the first is put to the caller. */
const ONE_QUESTION =
  'Only one question is asked at a time: the first ask of this step was put to the caller. Ask this one after its answer, if it is still needed.';

/**
 * What a finished step left for its caller, if the model called `klym__ask_caller` (validly: an invalid call was
 * answered with its error, and is not an ask) or a tool that `needsApproval`: the step's calls with their results,
 * the ask's left without one and each call to approve marked `waiting`. A question is asked first, then each call
 * to approve in turn; a second ask in the step gets an error result saying one question is asked at a time.
 * `undefined` for a step that needs nothing of its caller.
 */
export function parkedStep(stepMessages: readonly ModelMessage[], needsApproval: (toolName: string) => boolean = () => false): ParkedStep | undefined {
  const outputs = new Map<string, InFlightToolCall['output']>();
  const made: { toolCallId: string; toolName: string; input: unknown }[] = [];
  for (const message of stepMessages) {
    if (typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') outputs.set(part.toolCallId, part.output);
      else if (part.type === 'tool-call' && part.providerExecuted !== true)
        made.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
    }
  }
  let asked: AskedQuestion | undefined;
  const calls = made.map((call): InFlightToolCall => {
    const output = outputs.get(call.toolCallId);
    if (output !== undefined) return { ...call, output };
    if (call.toolName !== ASK_CALLER_TOOL_NAME) return needsApproval(call.toolName) ? { ...call, approval: 'waiting' } : call;
    if (asked !== undefined) return { ...call, output: { type: 'error-text', value: ONE_QUESTION } };
    asked = { toolCallId: call.toolCallId, question: String((call.input as { question?: unknown } | undefined)?.question ?? '') };
    return call;
  });
  asked ??= nextApproval(calls);
  return asked === undefined ? undefined : { asked, calls };
}

/**
 * `checkpoint` with `reply` given to its ask `toolCallId` (a call its `current` step left unanswered), as a
 * resumed run goes on from it: an answer is the ask's result; an approval marks the call `approved` (the resumed
 * run sends it); a denial is the call's result, with the reason. A checkpoint whose ask already has its reply is
 * returned as it is. `undefined` when the checkpoint has no such call, or the reply is not of its kind.
 */
export function answerAsk(checkpoint: AgentCheckpoint, toolCallId: string, reply: AskReply): AgentCheckpoint | undefined {
  const calls = checkpoint.current?.calls;
  const call = calls?.find((candidate) => candidate.toolCallId === toolCallId);
  if (checkpoint.current === undefined || calls === undefined || call === undefined) return undefined;
  if (call.output !== undefined || call.approval === 'approved') return checkpoint;
  if ('approved' in reply !== (call.approval === 'waiting')) return undefined;
  let replied: InFlightToolCall;
  if ('answer' in reply) replied = { ...call, output: { type: 'text', value: reply.answer } };
  else if (reply.approved) replied = { ...call, approval: 'approved' };
  else {
    const { approval: _waiting, ...denied } = call;
    replied = { ...denied, output: { type: 'error-text', value: deniedCallText(reply.reason) } };
  }
  return { ...checkpoint, current: { ...checkpoint.current, calls: calls.map((candidate) => (candidate === call ? replied : candidate)) } };
}
