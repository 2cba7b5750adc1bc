import type { ModelMessage, ToolSet } from 'ai';
import { tool, zodSchema } from 'ai';
import { z } from 'zod';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import type { AgentCheckpoint, InFlightToolCall } from './types.ts';

/** The built-in tool a run asks its caller with, when its `askCaller` is on. */
export const ASK_CALLER_TOOL_NAME = `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}ask_caller`;

/** The `finishReason` of a run that stopped to ask its caller (`AgentRunResult.asked` holds the question). */
export const INPUT_REQUIRED = 'input-required';

/** A question a run asked its caller: the ask's tool call, whose result the answer becomes. */
export interface AskedQuestion {
  readonly toolCallId: string;
  readonly question: string;
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
 * The ask of a finished step, if the model called `klym__ask_caller` (validly: an invalid call was answered
 * with its error, and is not an ask): the step's calls with their results, the ask's left without one. A second
 * ask in the step gets an error result saying one question is asked at a time. `undefined` for a step that did not ask.
 */
export function parkedStep(stepMessages: readonly ModelMessage[]): ParkedStep | undefined {
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
    if (output !== undefined || call.toolName !== ASK_CALLER_TOOL_NAME) return output === undefined ? call : { ...call, output };
    if (asked !== undefined) return { ...call, output: { type: 'error-text', value: ONE_QUESTION } };
    asked = { toolCallId: call.toolCallId, question: String((call.input as { question?: unknown } | undefined)?.question ?? '') };
    return call;
  });
  return asked === undefined ? undefined : { asked, calls };
}

/**
 * `checkpoint` with `answer` as the result of its ask `toolCallId` (the call its `current` step left unanswered),
 * as a resumed run gives it to the model. A checkpoint whose ask already has a result is returned as it is.
 * `undefined` when the checkpoint has no such call.
 */
export function answerAsk(checkpoint: AgentCheckpoint, toolCallId: string, answer: string): AgentCheckpoint | undefined {
  const calls = checkpoint.current?.calls;
  const call = calls?.find((candidate) => candidate.toolCallId === toolCallId);
  if (checkpoint.current === undefined || calls === undefined || call === undefined) return undefined;
  if (call.output !== undefined) return checkpoint;
  return {
    ...checkpoint,
    current: {
      ...checkpoint.current,
      calls: calls.map((candidate) => (candidate === call ? { ...call, output: { type: 'text', value: answer } } : candidate)),
    },
  };
}
