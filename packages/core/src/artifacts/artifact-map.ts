import { generateText, streamText, type LanguageModel } from 'ai';
import { contextLengthExceeded } from '../agent/context-window.ts';
import type { AgentUsage } from '../agent/types.ts';
import { addUsage, ZERO_USAGE } from '../agent/usage.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { chunkHeader, chunkLines, chunkPieces, chunkPrompt, halveChunk, type Chunk, type LinePiece } from './artifact-chunks.ts';
import type { LineIndex } from './artifact-text.ts';
import { createCallHolds, type CallHold } from './call-holds.ts';

export type { LinePiece };

/** What a map needs of its run: the model to call, how big a call may be, how many at once, and the run's budget. */
export interface ArtifactMapping {
  /** The model each chunk is sent to, in a call that offers no tools (the run's, or `mapModel`). */
  readonly model: LanguageModel;
  /** Whether the model is called streaming, as the run calls it (a provider's models), or whole (the scripted model). */
  readonly streams: boolean;
  /** The model's context window, in tokens: a call counts at most half of it. */
  readonly windowTokens: number;
  /**
   * The most tokens one call may count — system prompt, instruction and lines, as `countTokens` counts them —
   * whatever the window (and at most half of it). @default ARTIFACT_DEFAULTS.mapChunkTokens (32,000)
   */
  readonly chunkTokens?: number;
  /** Calls under way at once, at most. */
  readonly concurrency: number;
  /** The mapping model's tokenizer: chunks are sized, and each call's text checked before it is sent, with it. */
  readonly countTokens: (text: string) => number;
  readonly maxRetries: number;
  /** The run's signal: cancelling the task cancels every call. */
  readonly signal: AbortSignal;
  /**
   * Asked before each call is sent, with the most it may spend: its input as `countTokens` counts it and its output
   * allowance (`ARTIFACT_DEFAULTS.mapAnswerTokens`). A hold, released once the call's usage is told to `onUsage`,
   * lets it go; a reason (the run's budget cannot pay for it) makes it wait while the map's own calls under way hold
   * part of the budget, and once none does, stops the map, which starts no more calls and resolves with the answers
   * it got. @default every call goes
   */
  readonly reserve?: (most: AgentUsage) => { readonly release: () => void } | { readonly reason: string };
  /**
   * Told of each call's usage as the call ends, so the run counts it at once: a map that fails or is cancelled
   * has still spent it. A call cut off (cancelled, or stopped by another's failure) is estimated as its input.
   */
  readonly onUsage?: (usage: AgentUsage) => void;
}

/**
 * One chunk's answer: which lines it covered (0-based, `to` included), the lines it holds only part of, and
 * what the model said.
 */
export interface ChunkAnswer {
  readonly from: number;
  readonly to: number;
  /**
   * Set when the chunk holds part of a line too long for one chunk: line `from` from a character on, line `to`
   * up to a character, or both (one piece when `from === to`). Lines between them are whole.
   */
  readonly pieces?: readonly LinePiece[];
  readonly text: string;
}

/** A line too long for one chunk, split over consecutive chunks: its number (0-based), its characters, how many answers hold part of it. */
export interface SplitLine {
  readonly line: number;
  readonly chars: number;
  readonly chunks: number;
}

/** What a map gives: its answers, what its calls used, the lines it split, and why it stopped early, if it did. */
export interface MapOutcome {
  /** The answers, in the artifact's order; each character of the lines they cover was in exactly one call. */
  readonly answers: ChunkAnswer[];
  /** What its calls used, all told (each call was told to `onUsage` as it ended). */
  readonly usage: AgentUsage;
  /** Lines split over several chunks, by line; empty when every line fit in one. */
  readonly splitLines: SplitLine[];
  /**
   * Set when `reserve` stopped the map: the reason. `answers` are the calls that were answered (those
   * under way when it stopped included); the lines the others held were not read.
   */
  readonly stopped?: { readonly reason: string };
}

/** A call counts at most this share of the window: the rest is the answer's, and a margin for the tokenizer. */
const CHUNK_SHARE = 0.5;
/** Tokens a provider adds around the system prompt and the prompt (roles, separators): 3-4 a message. */
const REQUEST_FRAMING_TOKENS = 16;
/** Fewer tokens than this left for lines once the instruction is in is not a map worth running. */
const MIN_ROOM_TOKENS = 256;
/** A refused call is split in two, and a refused half again, this many times at most: a chunk 16 times too long still goes through. */
const MAX_REFUSALS = 4;

const SYSTEM = [
  'You are given one chunk of a larger text (its lines are numbered, 0-based, as in the whole text) and an instruction.',
  'Answer the instruction for this chunk only, precisely and briefly: your answer is combined with the answers for the other chunks.',
  'Quote line numbers for what you report. If the chunk holds nothing the instruction asks for, say exactly: nothing.',
  'A line too long for one chunk is split over consecutive chunks: a piece of it is numbered `N[chars C-D of L]` (characters C to D, 0-based, of line N, which has L),',
  'and the rest of that line is in the chunks before or after this one, so a record may begin or end outside this chunk.',
].join(' ');

/** A chunk's label in answers: `lines 3-5`, and the part held of a split line, `lines 5-5 (line 5: characters 0-99999 of 2000000)`. */
export function chunkLabel(answer: Pick<ChunkAnswer, 'from' | 'to' | 'pieces'>): string {
  const pieces = answer.pieces ?? [];
  const parts = pieces.map((piece) => `line ${piece.line}: characters ${piece.start}-${piece.end - 1} of ${piece.length}`);
  return `lines ${answer.from}-${answer.to}${parts.length === 0 ? '' : ` (${parts.join('; ')})`}`;
}

/**
 * A streamed call's whole text and usage, once it ended; rejects with its error. The SDK hands a stream's
 * error to `onError` and rejects `text` with a `NoOutputGeneratedError` that does not say it: the first is kept.
 */
export async function streamed(call: Parameters<typeof streamText>[0]): Promise<CallResult> {
  let failure: unknown;
  const result = streamText({ ...call, onError: ({ error }) => void (failure ??= error) });
  try {
    const [text, usage, finishReason] = await Promise.all([result.text, result.usage, result.finishReason]);
    return { text, usage, finishReason };
  } catch (error) {
    throw failure ?? error;
  }
}

/** What a call gave, streamed or not. */
export interface CallResult {
  readonly text: string;
  readonly usage: { readonly inputTokens?: number | undefined; readonly outputTokens?: number | undefined };
  readonly finishReason: string;
}

const aborted = (): KlymError => new KlymError('ABORTED', 'The map was cancelled with its task');

/**
 * Answers `instruction` on every chunk of the artifact's lines, `concurrency` calls at a time, each a model
 * call that offers no tools; the answers come back in chunk order, each with its line range. A line too long
 * for a chunk is split over consecutive chunks, never cut. Each call's text is counted before it is sent, and
 * one over its room, or refused by the provider as longer than its window, is split in two (a window the refusal
 * names sizes the calls after it).
 * Before each call is sent, what it may spend at most (its counted input, its output allowance) is held on the
 * run's budget (`reserve`), so that the calls under way at once never pass it together; each call's usage goes to
 * `onUsage` as it ends, and its hold is given back. A budget that cannot pay for the next call stops the map.
 * @throws {KlymError} `ABORTED` when the run is cancelled; `MODEL_ERROR` naming the chunk when a call fails (the
 * first failure stops the other calls); `CONTEXT_OVERFLOW` when a chunk halved four times is still refused;
 * `INVALID_ARGUMENT` when the instruction leaves no room for lines
 */
export async function mapLines(index: LineIndex, instruction: string, mapping: ArtifactMapping): Promise<MapOutcome> {
  const count = mapping.countTokens;
  let limit = Math.min(mapping.chunkTokens ?? ARTIFACT_DEFAULTS.mapChunkTokens, Math.floor(mapping.windowTokens * CHUNK_SHARE));
  const answerTokens = Math.min(ARTIFACT_DEFAULTS.mapAnswerTokens, Math.floor(mapping.windowTokens * (1 - CHUNK_SHARE)));
  const system = count(SYSTEM) + REQUEST_FRAMING_TOKENS;
  // The header with the widest line numbers it can have: a chunk's own is never longer.
  const widest: Chunk = { from: index.count, start: 0, to: index.count, end: 0 };
  const room = limit - system - count(chunkHeader(instruction, widest, index.count));
  if (room < MIN_ROOM_TOKENS) {
    throw new KlymError(
      'INVALID_ARGUMENT',
      `The instruction leaves ${Math.max(room, 0)} of the ${limit} tokens a map call may count (the smaller of \`mapChunkTokens\` and half the model's window) for the artifact's lines; shorten the instruction`,
    );
  }
  const chunks = chunkLines(index, room, count);
  const answers: ChunkAnswer[][] = [];
  // The first call that fails stops the others: the map has failed, and their answers would be spent for nothing.
  const failed = new AbortController();
  const signal = AbortSignal.any([mapping.signal, failed.signal]);
  let next = 0;
  let usage: AgentUsage = ZERO_USAGE;
  let stopped: { readonly reason: string } | undefined;
  let failure: unknown;
  const spend = (used: AgentUsage): void => {
    usage = addUsage(usage, used);
    mapping.onUsage?.(used);
  };
  const holds = createCallHolds(mapping.reserve);
  // A budget that cannot pay for the next call, with none under way, stops the map.
  const hold = async (most: AgentUsage): Promise<CallHold | undefined> => {
    const held = await holds.hold(most, () => {
      if (mapping.signal.aborted) throw aborted();
      return !failed.signal.aborted && stopped === undefined;
    });
    if (held === undefined || !('reason' in held)) return held;
    stopped ??= held;
    return undefined;
  };
  // A call and its usage: counted as it ends (a call cut off, as the input it sent), its hold given back after.
  const send = async (prompt: string, tokens: number, held: CallHold): Promise<CallResult> => {
    try {
      const call = { model: mapping.model, instructions: SYSTEM, prompt, maxOutputTokens: answerTokens, maxRetries: mapping.maxRetries, abortSignal: signal };
      const result: CallResult = mapping.streams ? await streamed(call) : await generateText(call);
      const input = result.usage.inputTokens ?? tokens;
      const output = result.usage.outputTokens ?? count(result.text);
      spend({
        inputTokens: input,
        outputTokens: output,
        totalTokens: input + output,
        estimated: result.usage.inputTokens === undefined || result.usage.outputTokens === undefined,
      });
      return result;
    } catch (error) {
      // A call cut off was sent: the provider read its input.
      if (signal.aborted) spend({ inputTokens: tokens, outputTokens: 0, totalTokens: tokens, estimated: true });
      throw error;
    } finally {
      held.release();
    }
  };

  // `refusals`: how many times the provider refused the chunks this one was halved from.
  const answer = async (chunk: Chunk, refusals: number): Promise<ChunkAnswer[]> => {
    if (mapping.signal.aborted) throw aborted();
    if (failed.signal.aborted || stopped !== undefined) return [];
    const prompt = chunkPrompt(instruction, index, chunk);
    const tokens = system + count(prompt);
    // Planned by lines counted one by one, a chunk may count a little more whole: split, never sent over its room.
    if (tokens > limit) return halves(chunk, refusals, undefined);
    const held = await hold({ inputTokens: tokens, outputTokens: answerTokens, totalTokens: tokens + answerTokens, estimated: true });
    if (held === undefined) return [];
    try {
      const result = await send(prompt, tokens, held);
      // An answer cut at its allowance says so: whoever combines the answers must not take it for a whole one.
      const cut = result.finishReason === 'length' ? `\n[cut: the answer reached the ${answerTokens} tokens a map answer may have]` : '';
      return [{ from: chunk.from, to: chunk.to, ...withPieces(chunkPieces(index, chunk)), text: `${result.text.trim()}${cut}` }];
    } catch (error) {
      if (mapping.signal.aborted) throw aborted();
      if (failed.signal.aborted) return [];
      // A refused request costs nothing; its halves may fit. A window the provider names sizes the calls still to come.
      const said = contextLengthExceeded(error);
      if (said !== undefined) {
        if (said.window !== undefined && said.window > 0) limit = Math.min(limit, Math.floor(said.window * CHUNK_SHARE));
        return halves(chunk, refusals + 1, error);
      }
      failed.abort();
      throw new KlymError('MODEL_ERROR', `The map's call on ${chunkLabel({ ...chunk, ...withPieces(chunkPieces(index, chunk)) })} failed: ${describe(error)}`, {
        cause: error,
      });
    }
  };
  // Halved before it was sent, a chunk always can be, down to one character; refused, only `MAX_REFUSALS` times.
  const halves = async (chunk: Chunk, refusals: number, refusal: unknown): Promise<ChunkAnswer[]> => {
    const parts = refusals <= MAX_REFUSALS ? halveChunk(index, chunk) : undefined;
    if (parts === undefined) {
      failed.abort();
      const label = chunkLabel({ ...chunk, ...withPieces(chunkPieces(index, chunk)) });
      const why =
        refusal === undefined
          ? `counts more than the ${limit} tokens a map call may`
          : `was refused as longer than the model's context window, even halved ${MAX_REFUSALS} times: ${describe(refusal)}`;
      throw new KlymError('CONTEXT_OVERFLOW', `The map's call on ${label} ${why}`, refusal === undefined ? {} : { cause: refusal });
    }
    const first = await answer(parts[0], refusals);
    return [...first, ...(await answer(parts[1], refusals))];
  };
  // A call under way may stop the map (`stopped`) or fail it: each worker asks before taking the next chunk.
  const more = (): boolean => next < chunks.length && !failed.signal.aborted && stopped === undefined;
  const work = async (): Promise<void> => {
    while (more()) {
      const at = next++;
      try {
        answers[at] = await answer(chunks[at] as Chunk, 0);
      } catch (error) {
        failure ??= error;
        failed.abort();
        return;
      }
    }
  };
  // Every call is waited for, the failed map's too: what each spent reaches `onUsage` before the map returns.
  await Promise.all(Array.from({ length: Math.min(mapping.concurrency, chunks.length) }, work));
  if (failure !== undefined) throw failure;
  if (mapping.signal.aborted) throw aborted();
  const answered = answers.flat();
  return { answers: answered, usage, splitLines: splitLinesOf(answered), ...(stopped === undefined ? {} : { stopped }) };
}

function withPieces(pieces: readonly LinePiece[]): { readonly pieces?: readonly LinePiece[] } {
  return pieces.length === 0 ? {} : { pieces };
}

function splitLinesOf(answers: readonly ChunkAnswer[]): SplitLine[] {
  const split = new Map<number, { line: number; chars: number; chunks: number }>();
  for (const answer of answers) {
    for (const piece of answer.pieces ?? []) {
      const known = split.get(piece.line);
      if (known === undefined) split.set(piece.line, { line: piece.line, chars: piece.length, chunks: 1 });
      else known.chunks++;
    }
  }
  return [...split.values()].toSorted((a, b) => a.line - b.line);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
