import { generateText, streamText, type LanguageModel } from 'ai';
import type { AgentUsage } from '../agent/types.ts';
import { addUsage, ZERO_USAGE } from '../agent/usage.ts';
import { KlymError } from '../errors.ts';
import type { LineIndex } from './artifact-text.ts';

/** What a map needs of its run: the model to call, how big a call may be, how many at once. */
export interface ArtifactMapping {
  /** The model each chunk is sent to, in a call that offers no tools (the run's, or `mapModel`). */
  readonly model: LanguageModel;
  /** Whether the model is called streaming, as the run calls it (a provider's models), or whole (the scripted model). */
  readonly streams: boolean;
  /** The model's context window, in tokens: a chunk with the instruction fits well inside it. */
  readonly windowTokens: number;
  /** Calls under way at once, at most. */
  readonly concurrency: number;
  readonly countTokens: (text: string) => number;
  readonly maxRetries: number;
  /** The run's signal: cancelling the task cancels every call. */
  readonly signal: AbortSignal;
}

/** One chunk's answer: which lines it covered (0-based, `to` included), and what the model said. */
export interface ChunkAnswer {
  readonly from: number;
  readonly to: number;
  readonly text: string;
}

/** A chunk's room for lines: what is left of the window once the instruction, the framing and the answer have theirs. */
const CHUNK_SHARE = 0.5;
const FRAMING_TOKENS = 200;

const SYSTEM = [
  'You are given one chunk of a larger text (its lines are numbered, 0-based, as in the whole text) and an instruction.',
  'Answer the instruction for this chunk only, precisely and briefly: your answer is combined with the answers for the other chunks.',
  'Quote line numbers for what you report. If the chunk holds nothing the instruction asks for, say exactly: nothing.',
].join(' ');

/**
 * Cuts `index` on line boundaries into consecutive chunks (each line in exactly one) of at most `room`
 * tokens each; a line bigger than `room` is a chunk of its own, cut to fit.
 */
export function chunkLines(index: LineIndex, room: number, countTokens: (text: string) => number): { readonly from: number; readonly to: number }[] {
  const chunks: { from: number; to: number }[] = [];
  let from = 0;
  let used = 0;
  for (let n = 0; n < index.count; n++) {
    const tokens = countTokens(index.line(n)) + 1;
    if (n > from && used + tokens > room) {
      chunks.push({ from, to: n - 1 });
      from = n;
      used = 0;
    }
    used += tokens;
  }
  if (index.count > from) chunks.push({ from, to: index.count - 1 });
  return chunks;
}

/** A chunk's lines as the model reads them: numbered, a line too big for the chunk cut with a marker. */
function chunkText(index: LineIndex, chunk: { readonly from: number; readonly to: number }, roomChars: number): string {
  const lines: string[] = [];
  for (let n = chunk.from; n <= chunk.to; n++) {
    const line = index.line(n);
    lines.push(`${n}: ${chunk.from === chunk.to && line.length > roomChars ? `${line.slice(0, roomChars)}… [${line.length - roomChars} more characters]` : line}`);
  }
  return lines.join('\n');
}

/** A streamed call's whole text and usage, once it ended; rejects with its error. */
async function finished(result: ReturnType<typeof streamText>): Promise<{ readonly text: string; readonly usage: { readonly inputTokens?: number | undefined; readonly outputTokens?: number | undefined } }> {
  const [text, usage] = await Promise.all([result.text, result.usage]);
  return { text, usage };
}

/**
 * Answers `instruction` on every chunk of the artifact's lines, `concurrency` calls at a time, each a model
 * call that offers no tools; the answers come back in chunk order, each with its line range.
 * @throws {KlymError} `ABORTED` when the run is cancelled; `MODEL_ERROR` naming the chunk when a call fails
 */
export async function mapLines(index: LineIndex, instruction: string, mapping: ArtifactMapping): Promise<{ readonly answers: ChunkAnswer[]; readonly usage: AgentUsage }> {
  const room = Math.max(1, Math.floor(mapping.windowTokens * CHUNK_SHARE) - mapping.countTokens(instruction) - FRAMING_TOKENS);
  const chunks = chunkLines(index, room, mapping.countTokens);
  const answers: ChunkAnswer[] = Array.from({ length: chunks.length });
  // The first call that fails stops the others: the map has failed, and their answers would be spent for nothing.
  const failed = new AbortController();
  const signal = AbortSignal.any([mapping.signal, failed.signal]);
  let next = 0;
  let usage: AgentUsage = ZERO_USAGE;
  const work = async (): Promise<void> => {
    while (next < chunks.length && !failed.signal.aborted) {
      const at = next++;
      const chunk = chunks[at] as { from: number; to: number };
      if (mapping.signal.aborted) throw new KlymError('ABORTED', 'The map was cancelled with its task');
      const prompt = `Instruction: ${instruction}\n\nLines ${chunk.from} to ${chunk.to} of ${index.count}:\n${chunkText(index, chunk, room * 2)}`;
      try {
        const call = { model: mapping.model, instructions: SYSTEM, prompt, maxRetries: mapping.maxRetries, abortSignal: signal };
        const result = mapping.streams ? await finished(streamText({ ...call, onError: () => {} })) : await generateText(call);
        const input = result.usage.inputTokens ?? mapping.countTokens(SYSTEM + prompt);
        const output = result.usage.outputTokens ?? mapping.countTokens(result.text);
        usage = addUsage(usage, { inputTokens: input, outputTokens: output, totalTokens: input + output, estimated: result.usage.inputTokens === undefined });
        answers[at] = { from: chunk.from, to: chunk.to, text: result.text.trim() };
      } catch (error) {
        if (mapping.signal.aborted) throw new KlymError('ABORTED', 'The map was cancelled with its task');
        if (failed.signal.aborted) return;
        failed.abort();
        throw new KlymError('MODEL_ERROR', `The map's call on lines ${chunk.from}-${chunk.to} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(mapping.concurrency, chunks.length) }, work));
  return { answers, usage };
}
