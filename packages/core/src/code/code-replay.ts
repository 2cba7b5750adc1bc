import type { ModelMessage } from 'ai';
import type { Checkpointer } from '../agent/checkpoint.ts';
import type { AgentCheckpoint, InFlightToolCall } from '../agent/types.ts';
import type { ToolResultOutput } from '../tools/tool-result.ts';
import { CODE_TOOL_NAME, runProgram, type CodeRunning } from './code-tool.ts';

/**
 * The `klym__run_code` calls a crash interrupted in `checkpoint`'s step under way: sent, with no result recorded.
 * A resumed run runs each again from its start (`runProgram` with the call's `hostCalls` as its replay) rather than
 * telling the model its outcome is unknown.
 */
export function interruptedPrograms(checkpoint: AgentCheckpoint | undefined): InFlightToolCall[] {
  return (checkpoint?.current?.calls ?? []).filter((call) => call.toolName === CODE_TOOL_NAME && call.output === undefined);
}

/** `messages` (a resumed run's, see `resumeFrom`) with the result of each call in `outputs` put in place of the one it had. */
export function withProgramOutputs(messages: readonly ModelMessage[], outputs: ReadonlyMap<string, ToolResultOutput>): ModelMessage[] {
  if (outputs.size === 0) return [...messages];
  return messages.map((message) => {
    if (message.role !== 'tool' || !message.content.some((part) => part.type === 'tool-result' && outputs.has(part.toolCallId))) return message;
    return {
      ...message,
      content: message.content.map((part) => {
        const output = part.type === 'tool-result' ? outputs.get(part.toolCallId) : undefined;
        return output === undefined || part.type !== 'tool-result' ? part : { ...part, output };
      }),
    };
  });
}

/** What {@link replayInterrupted} runs the programs of a resumed checkpoint with. */
export interface ReplayOptions {
  readonly running: CodeRunning;
  readonly checkpoint: AgentCheckpoint;
  /** The resumed run's conversation (`resumeFrom`'s), where each interrupted program's result is an unknown outcome. */
  readonly messages: readonly ModelMessage[];
  readonly checkpoints: Pick<Checkpointer, 'reopen' | 'answered'>;
  readonly signal: AbortSignal;
}

/**
 * Runs each program {@link interruptedPrograms} finds again, from its start, its host calls answered from its
 * record (see `runProgram`), while the run's checkpoints stay the interrupted step's, so that a crash meanwhile
 * resumes the same way; answers `messages` with each program's new result (its answer, or its error) in place.
 */
export async function replayInterrupted(options: ReplayOptions): Promise<ModelMessage[]> {
  const { running, checkpoint, checkpoints, signal } = options;
  const { current, elapsedMs: _elapsedMs, ...completed } = checkpoint;
  // The interrupted step stays the one under way: a crash while its programs run again resumes the same way.
  if (current !== undefined) checkpoints.reopen({ ...completed, current });
  const outputs = new Map<string, ToolResultOutput>();
  for (const call of interruptedPrograms(checkpoint)) {
    const code = String((call.input as { code?: unknown } | undefined)?.code ?? '');
    const output: ToolResultOutput = await runProgram(running, { toolCallId: call.toolCallId, code, signal, replay: call.hostCalls ?? [] }).then(
      (text) => ({ type: 'text', value: text }),
      (error: unknown) => ({ type: 'error-text', value: error instanceof Error ? error.message : String(error) }),
    );
    checkpoints.answered(call.toolCallId, output);
    outputs.set(call.toolCallId, output);
  }
  return withProgramOutputs(options.messages, outputs);
}
