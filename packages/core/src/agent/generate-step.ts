import type { CallToolResult } from '@modelcontextprotocol/client';
import { generateText } from 'ai';
import { raceAbort } from '../internal/abort.ts';
import type { StepInput } from './run-step.ts';
import { errorText, modelCallOf, type StepEnding, type StepRecord } from './step-record.ts';

/**
 * A step as one model call that answers whole (`generateText`, one step), for a model that gains nothing
 * from a stream. It reports what a stream would, in the same order: the text and the calls once the model
 * answered (a call the model got wrong is refused at once, as a stream refuses it), then each call's
 * outcome as its execution ends.
 *
 * An abort ends the step at once, as it ends a stream: what the SDK still reports afterwards (the calls
 * it cut off failing) is not the step's, so those calls stay without a result.
 */
export async function generateStep(input: StepInput, record: StepRecord): Promise<StepEnding> {
  const { signal } = input;
  const generating = generateText({
    ...modelCallOf(input),
    onLanguageModelCallEnd: ({ content }) => {
      if (signal.aborted) return;
      for (const part of content) {
        if (part.type === 'text') record.text(part.text);
        else if (part.type === 'reasoning') record.reasoning(part.text.length);
        else if (part.type === 'tool-call') {
          record.call(part.toolCallId, part.toolName, part.input);
          // An unknown tool or bad arguments: never executed; the SDK answers it with its error's text.
          if (part.invalid === true) record.failure(part.toolCallId, part.toolName, part.input, errorText(part.error));
        }
      }
    },
    onToolExecutionEnd: ({ toolOutput }) => {
      if (signal.aborted) return;
      if (toolOutput.type === 'tool-result') record.result(toolOutput.toolCallId, toolOutput.toolName, toolOutput.input, toolOutput.output as CallToolResult);
      else record.failure(toolOutput.toolCallId, toolOutput.toolName, toolOutput.input, toolOutput.error);
    },
  });

  try {
    // One step (`stopWhen`'s default): the step's own figures, as a stream's `finish-step` gives them.
    const { finalStep } = await raceAbort(generating, signal);
    return { finishReason: finalStep.finishReason, reported: finalStep.usage, aborted: false, error: undefined, messages: () => finalStep.response.messages };
  } catch (error) {
    if (signal.aborted) return { finishReason: undefined, reported: undefined, aborted: true, error: undefined };
    return { finishReason: undefined, reported: undefined, aborted: false, error };
  }
}
