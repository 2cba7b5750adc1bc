import type { CallToolResult } from '@modelcontextprotocol/client';
import { streamText, type LanguageModelUsage } from 'ai';
import type { StepInput } from './run-step.ts';
import { modelCallOf, type StepEnding, type StepRecord } from './step-record.ts';

/**
 * A step as one streamed model call (`streamText`, whose `stopWhen` default of one step is kept): the
 * text arrives as it is written, so a step cut off by an abort keeps what came.
 */
export async function streamStep(input: StepInput, record: StepRecord): Promise<StepEnding> {
  let finishReason: string | undefined;
  let reported: LanguageModelUsage | undefined;
  let aborted = false;
  let error: unknown;
  const result = streamText({
    ...modelCallOf(input),
    // Errors arrive as stream parts; without this the SDK would print them to the console.
    onError: () => {},
  });

  try {
    for await (const part of result.fullStream) {
      switch (part.type) {
        case 'text-delta':
          record.text(part.text);
          break;
        case 'reasoning-delta':
          record.reasoning(part.text.length);
          break;
        case 'tool-call':
          record.call(part.toolCallId, part.toolName, part.input);
          break;
        case 'tool-result':
          record.result(part.toolCallId, part.toolName, part.input, part.output as CallToolResult);
          break;
        case 'tool-error':
          record.failure(part.toolCallId, part.toolName, part.input, part.error);
          break;
        case 'finish-step':
          finishReason = part.finishReason;
          reported = part.usage;
          break;
        case 'error':
          error ??= part.error;
          break;
        case 'abort':
          aborted = true;
          break;
        default:
          break;
      }
    }
  } catch (thrown) {
    if (input.signal.aborted) aborted = true;
    else error ??= thrown;
  }
  return { finishReason, reported, aborted, error, messages: async () => (await result.response).messages };
}
