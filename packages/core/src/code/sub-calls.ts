import { generateText } from 'ai';
import { contextLengthExceeded } from '../agent/context-window.ts';
import type { AgentUsage } from '../agent/types.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { streamed, type ArtifactMapping, type CallResult } from '../artifacts/artifact-map.ts';
import { createCallHolds, type CallHold } from '../artifacts/call-holds.ts';
import { countText as tokens } from '../internal/count-text.ts';

/** A program's sub-calls: `llm(instruction, text)` and `llmMap(instruction, texts)`. */
export interface SubCalls {
  /** One sub-call; `onUsage` hears what it spent. */
  llm(instruction: unknown, text: unknown, onUsage?: (used: AgentUsage) => void): Promise<string>;
  /** A sub-call per text, `mapping.concurrency` at a time; the answers in the texts' order. The first failure fails it. */
  llmMap(instruction: unknown, texts: unknown, onUsage?: (used: AgentUsage) => void): Promise<string[]>;
}

/** A sub-call counts at most this share of the window, as a map's call does: the rest is the answer's. */
const CALL_SHARE = 0.5;
/** Tokens a provider adds around the system prompt and the prompt (roles, separators). */
const REQUEST_FRAMING_TOKENS = 16;

const SYSTEM =
  'You are called from a program with an instruction and a text. Follow the instruction for that text only, precisely and briefly: ' +
  'your answer is read by the program, so give just the answer, in the form the instruction asks for.';

/** Why the budget cannot pay for more: the program stops, and its tool result says so. */
export const budgetStop = (reason: string): KlymError => new KlymError('BUDGET_EXCEEDED', `The budget stopped the program: ${reason}`);

const instructionOf = (instruction: unknown, what: string): string => {
  if (typeof instruction !== 'string' || instruction.trim() === '') {
    throw new KlymError('INVALID_ARGUMENT', `${what}: the instruction must be a non-empty string, got ${JSON.stringify(instruction) ?? String(instruction)}`);
  }
  return instruction;
};
// An object is given as its JSON: a program may pass a row or a tool's answer as it is.
const textOf = (text: unknown): string => (typeof text === 'string' ? text : (JSON.stringify(text) ?? String(text)));

/**
 * The sub-calls of one program, each one model call that offers no tools, made the way `klym__map_artifact`'s are
 * (`mapping`: the model, its window, its tokenizer, the run's budget): counted before it is sent and refused when
 * it does not fit its room (the smaller of `mapChunkTokens` and half the window), its most held on the run's budget
 * before it is sent and its usage counted as it ends. `llmMap` runs `mapping.concurrency` calls at a time.
 *
 * @throws {KlymError} `INVALID_ARGUMENT` for arguments of the wrong type; `CONTEXT_OVERFLOW` naming the sizes when a
 * text does not fit; `BUDGET_EXCEEDED` when the budget cannot pay for a call; `MODEL_ERROR` when the call fails.
 */
export function createSubCalls(mapping: ArtifactMapping, signal: AbortSignal): SubCalls {
  const count = mapping.countTokens;
  const limit = Math.min(mapping.chunkTokens ?? ARTIFACT_DEFAULTS.mapChunkTokens, Math.floor(mapping.windowTokens * CALL_SHARE));
  const answerTokens = Math.min(ARTIFACT_DEFAULTS.mapAnswerTokens, Math.floor(mapping.windowTokens * (1 - CALL_SHARE)));
  const system = count(SYSTEM) + REQUEST_FRAMING_TOKENS;
  const holds = createCallHolds(mapping.reserve);
  // A budget that cannot pay for the next sub-call, with none under way, ends the program.
  const hold = async (total: number, input: number): Promise<CallHold> => {
    const most = { inputTokens: input, outputTokens: answerTokens, totalTokens: total, estimated: true };
    // Only a cancel gives up (it throws): a program's sub-calls never stop each other.
    const held = await holds.hold(most, () => {
      signal.throwIfAborted();
      return true;
    });
    if (held === undefined || 'reason' in held) throw budgetStop(held?.reason ?? 'the budget is spent');
    return held;
  };

  const call = async (instruction: string, text: string, what: string, onUsage: ((used: AgentUsage) => void) | undefined): Promise<string> => {
    const spend = (inputTokens: number, outputTokens: number, estimated: boolean): void => {
      const used = { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens, estimated };
      mapping.onUsage?.(used);
      onUsage?.(used);
    };
    const prompt = `${instruction}\n\n<text>\n${text}\n</text>`;
    const input = system + count(prompt);
    if (input > limit) {
      throw new KlymError(
        'CONTEXT_OVERFLOW',
        `${what}: the text is too big for one sub-call: it counts ${tokens(count(text))} tokens (${tokens(text.length)} characters), the instruction ${tokens(count(instruction))}, ` +
          `${tokens(input)} in all, and a sub-call may count ${tokens(limit)} (the smaller of mapChunkTokens and half the model's window): split it, or filter it first`,
      );
    }
    const held = await hold(input + answerTokens, input);
    try {
      const request = {
        model: mapping.model,
        instructions: SYSTEM,
        prompt,
        maxOutputTokens: answerTokens,
        maxRetries: mapping.maxRetries,
        abortSignal: signal,
      };
      let result: CallResult;
      try {
        result = mapping.streams ? await streamed(request) : await generateText(request);
      } catch (error) {
        // A call cut off was sent: the provider read its input.
        if (signal.aborted) spend(input, 0, true);
        throw error;
      }
      const inputTokens = result.usage.inputTokens ?? input;
      const outputTokens = result.usage.outputTokens ?? count(result.text);
      spend(inputTokens, outputTokens, result.usage.inputTokens === undefined || result.usage.outputTokens === undefined);
      // An answer cut at its allowance says so: the program must not take it for a whole one.
      const cut = result.finishReason === 'length' ? `\n[cut: the answer reached the ${tokens(answerTokens)} tokens a sub-call's answer may have]` : '';
      return `${result.text.trim()}${cut}`;
    } catch (error) {
      if (signal.aborted || error instanceof KlymError) throw error;
      const said = contextLengthExceeded(error);
      if (said !== undefined) {
        throw new KlymError(
          'CONTEXT_OVERFLOW',
          `${what}: the provider refused the sub-call as longer than the model's window (it counted ${tokens(input)} tokens here)`,
          {
            cause: error,
          },
        );
      }
      throw new KlymError('MODEL_ERROR', `${what} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    } finally {
      held.release();
    }
  };

  return {
    llm: (instruction, text, onUsage) => call(instructionOf(instruction, 'llm()'), textOf(text), 'llm()', onUsage),
    async llmMap(instruction, texts, onUsage) {
      const checked = instructionOf(instruction, 'llmMap()');
      if (!Array.isArray(texts)) throw new KlymError('INVALID_ARGUMENT', `llmMap(): texts must be an array, got ${typeof texts}`);
      const answers: string[] = [];
      let next = 0;
      let failure: unknown;
      const work = async (): Promise<void> => {
        while (next < texts.length && failure === undefined) {
          const at = next++;
          try {
            answers[at] = await call(checked, textOf(texts[at]), `llmMap() on texts[${at}]`, onUsage);
          } catch (error) {
            failure ??= error;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(mapping.concurrency, texts.length) }, work));
      if (failure !== undefined) throw failure;
      return answers;
    },
  };
}
