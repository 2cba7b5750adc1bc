import { APICallError } from 'ai';
import { convertArrayToReadableStream } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from '../../../../test/support/fake-llm-server.ts';
import { createBudgetHolds, resolveBudget } from '../agent/budget.ts';
import type { LanguageModelCallOptions, LanguageModelStreamPart } from '../agent/language-model.ts';
import { resolveModel } from '../agent/model-resolver.ts';
import { createScriptedModel } from '../agent/scripted-model.ts';
import { createTokenCounter } from '../agent/token-count.ts';
import type { AgentUsage, ModelPrice } from '../agent/types.ts';
import { addUsage, costOf, ZERO_USAGE } from '../agent/usage.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { createMockModel, mockTurnParts } from '../testing/mock-model.ts';
import { chunkLabel, mapLines, type ArtifactMapping, type ChunkAnswer } from './artifact-map.ts';
import { indexLines } from './artifact-text.ts';

const o200k = await createTokenCounter('openai:gpt-4.1-mini');
/** gpt-4.1-mini's window: a map's calls are still capped by `mapChunkTokens`. */
const MILLION_WINDOW = 1_047_576;

/** The prompt a map call sent, and its system prompt. */
function sent(options: LanguageModelCallOptions): { readonly system: string; readonly prompt: string } {
  let system = '';
  let prompt = '';
  for (const message of options.prompt) {
    if (message.role === 'system') system += message.content;
    if (message.role === 'user') for (const part of message.content) if (part.type === 'text') prompt += part.text;
  }
  return { system, prompt };
}

/** The lines of a call's prompt, after its header. */
const bodyOf = (prompt: string): string => prompt.slice(prompt.indexOf(':\n', prompt.indexOf('\n\nLines ')) + 2);

const PREFIX = /^(\d+)(?:\[chars (\d+)-(\d+) of (\d+)\])?: /;

/**
 * What the calls' bodies held, in the order given, line by line: each row's number and, for a piece of a
 * line, its characters checked against where it falls. Throws when a row does not continue the text where
 * the one before ended, or a piece breaks a surrogate pair.
 */
const wrong = (row: string, why: string): Error => new Error(`${why}: ${row.slice(0, 80)}`);

function reassemble(bodies: readonly string[]): string[] {
  const lines: string[] = [];
  for (const body of bodies) {
    for (const row of body.split('\n')) {
      const prefix = PREFIX.exec(row);
      if (prefix === null) throw wrong(row, 'A row without its line number');
      const n = Number(prefix[1]);
      const text = row.slice(prefix[0].length);
      const first = prefix[2] === undefined ? 0 : Number(prefix[2]);
      if (prefix[2] !== undefined && Number(prefix[3]) - first + 1 !== text.length) throw wrong(row, 'A piece whose characters are not its range');
      if (!text.isWellFormed()) throw wrong(row, 'A piece that breaks a surrogate pair');
      if (first === 0) {
        if (n !== lines.length) throw wrong(row, `Line ${lines.length} expected`);
        lines.push(text);
      } else {
        if (n !== lines.length - 1 || first !== (lines[n] as string).length)
          throw wrong(row, `Line ${lines.length - 1} from character ${lines.at(-1)?.length} expected`);
        lines[n] += text;
      }
    }
  }
  return lines;
}

/** A model that answers each call with the lines it was given, and keeps what each call sent. */
function echoModel(): { readonly model: ReturnType<typeof createScriptedModel>; readonly calls: { readonly system: string; readonly prompt: string }[] } {
  const calls: { system: string; prompt: string }[] = [];
  const model = createScriptedModel({
    steps: ({ options }) => {
      const call = sent(options);
      calls.push(call);
      // Usage reported, as a provider does: the answer is not counted by the map.
      return { text: bodyOf(call.prompt), usage: { inputTokens: 1, outputTokens: 1 } };
    },
  });
  return { model, calls };
}

const mapping = (model: ArtifactMapping['model'], overrides: Partial<ArtifactMapping> = {}): ArtifactMapping => ({
  model,
  streams: false,
  windowTokens: MILLION_WINDOW,
  concurrency: 1,
  countTokens: o200k.count,
  maxRetries: 0,
  signal: new AbortController().signal,
  ...overrides,
});

/** A JSON array of records on one line, with accents, Cyrillic and emoji (surrogate pairs), about `bytes` long. */
function jsonLine(bytes: number): string {
  const records: string[] = [];
  let length = 2;
  for (let n = 0; length < bytes; n++) {
    const record = JSON.stringify({
      id: n,
      node: `svc-${n % 17}`,
      status: n % 7 === 0 ? 'ERROR' : 'ok',
      note: n % 5 === 0 ? `café Київ 🚀${n}` : `latency=${(n * 37) % 1000}ms`,
    });
    records.push(record);
    length += record.length + 1;
  }
  return `[${records.join(',')}]`;
}

/** A log line. */
const short = (n: number): string => `2026-11-25T03:14:${String(n % 60).padStart(2, '0')}Z svc-${n % 13} INFO request ok id=${n.toString(16)}`;

/** A provider's answer to a map call: seen, 1,000 tokens in, 10 out. */
const seen = (): { stream: ReadableStream<LanguageModelStreamPart> } => ({
  stream: convertArrayToReadableStream(mockTurnParts({ text: 'seen', usage: { input: 1_000, output: 10 } })),
});

/** A call that hangs until it is aborted. */
const hanging = (options: LanguageModelCallOptions): Promise<never> =>
  new Promise((_, reject) => options.abortSignal?.addEventListener('abort', () => reject(options.abortSignal?.reason), { once: true }));

describe('mapLines on a line longer than a chunk', () => {
  it('splits a 2 MB one-line answer over consecutive chunks that hold it exactly, each within mapChunkTokens whatever the window, and says so', async () => {
    const line = jsonLine(2_000_000);
    const { model, calls } = echoModel();
    let counted = 0;
    const countTokens = (text: string): number => {
      counted += text.length;
      return o200k.count(text);
    };

    const outcome = await mapLines(indexLines(line), 'Count the ERROR records.', mapping(model, { countTokens }));

    expect(calls.length).toBeGreaterThan(10);
    expect(reassemble(calls.map((call) => bodyOf(call.prompt)))).toEqual([line]);
    expect(outcome.splitLines).toEqual([{ line: 0, chars: line.length, chunks: calls.length }]);
    expect(outcome.answers.map((answer) => answer.text)).toEqual(calls.map((call) => bodyOf(call.prompt)));
    // Each answer's pieces say exactly which characters its call held, and the label says it.
    let next = 0;
    for (const answer of outcome.answers) {
      expect(answer).toMatchObject({ from: 0, to: 0, pieces: [{ line: 0, start: next, length: line.length }] });
      const piece = answer.pieces?.[0] as NonNullable<ChunkAnswer['pieces']>[number];
      expect(chunkLabel(answer)).toBe(`lines 0-0 (line 0: characters ${piece.start}-${piece.end - 1} of ${line.length})`);
      next = piece.end;
    }
    expect(next).toBe(line.length);
    // A million-token window, and still no call over mapChunkTokens, counted as sent; full chunks come close to it.
    const sizes = calls.map((call) => o200k.count(call.system) + o200k.count(call.prompt));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(ARTIFACT_DEFAULTS.mapChunkTokens);
    expect(Math.min(...sizes.slice(0, -1))).toBeGreaterThan(0.8 * ARTIFACT_DEFAULTS.mapChunkTokens);
    // Each character counted three times (the line, its piece, its call as sent), not again for each piece after it.
    expect(counted).toBeLessThan(3.1 * line.length);
    expect(calls[0]?.system).toContain('split over consecutive chunks');
  });

  it('keeps short lines whole around long ones, every character in exactly one chunk, in order', async () => {
    const lines = [
      ...Array.from({ length: 120 }, (_, n) => short(n)),
      Array.from({ length: 6_000 }, (_, n) => `v${n}=${(n * 31) % 977}`).join(';'),
      '',
      ...Array.from({ length: 30 }, (_, n) => short(n + 120)),
      `🚀${'é🚀'.repeat(9_000)}`,
      jsonLine(30_000),
      ...Array.from({ length: 200 }, (_, n) => short(n + 150)),
    ];
    const { model, calls } = echoModel();

    const outcome = await mapLines(indexLines(lines.join('\n')), 'Count the lines.', mapping(model, { chunkTokens: 2_000, concurrency: 3 }));

    // The answers in the artifact's order hold it all, once.
    expect(reassemble(outcome.answers.map((answer) => answer.text))).toEqual(lines);
    expect(outcome.splitLines.map((split) => split.line)).toEqual([120, 152, 153]);
    // A chunk begins with whole short lines and ends with the start of a long line; the next one goes on with it.
    const into = outcome.answers.findIndex((answer) => answer.from < 120 && answer.to === 120);
    expect(outcome.answers[into]?.pieces).toEqual([{ line: 120, start: 0, end: expect.any(Number), length: (lines[120] as string).length }]);
    expect(outcome.answers[into + 1]?.pieces?.[0]).toMatchObject({ line: 120, start: outcome.answers[into]?.pieces?.[0]?.end });
    // A long line's last piece shares its chunk with the lines after it.
    expect(outcome.answers.some((answer) => answer.from === 120 && answer.to > 121)).toBe(true);
    for (const call of calls) expect(o200k.count(call.system) + o200k.count(call.prompt)).toBeLessThanOrEqual(2_000);
  });

  it('caps a call by mapChunkTokens whatever the window, and by half the window when that is smaller', async () => {
    const text = Array.from({ length: 3_000 }, (_, n) => `${n} svc-${n % 13} ERROR request failed code=5${n % 10}2`).join('\n');
    const largest = async (overrides: Partial<ArtifactMapping>): Promise<number> => {
      const { model, calls } = echoModel();
      await mapLines(indexLines(text), 'Count the ERROR lines.', mapping(model, overrides));
      return Math.max(...calls.map((call) => o200k.count(call.system) + o200k.count(call.prompt)));
    };
    const capped = await largest({ chunkTokens: 4_000 });
    expect(capped).toBeLessThanOrEqual(4_000);
    expect(capped).toBeGreaterThan(3_500);
    const halfWindow = await largest({ windowTokens: 6_000 });
    expect(halfWindow).toBeLessThanOrEqual(3_000);
    expect(halfWindow).toBeGreaterThan(2_500);
  });

  it('refuses an instruction that leaves no room for lines, naming the limit', async () => {
    const { model, calls } = echoModel();
    await expect(mapLines(indexLines('a\nb'), 'x'.repeat(4_000), mapping(model, { chunkTokens: 600 }))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('of the 600 tokens a map call may count'),
    });
    expect(calls).toEqual([]);
  });
});

describe('mapLines against a provider that refuses a call as too long', () => {
  it('splits a refused chunk and sends both halves: the map succeeds, and no request over the window was answered', async () => {
    const WINDOW = 3_000;
    const text = Array.from({ length: 2_000 }, (_, n) => `2026-11-25T03:14:15Z svc-${n % 13} ${n % 9 === 0 ? 'ERROR' : 'INFO'} id=${n.toString(16)}`).join(
      '\n',
    );
    const answered: FakeRequest[] = [];
    // The model answers each call with the lines it was given (the fake refuses any request over its window first).
    const reply = (request: FakeRequest): FakeReply => {
      answered.push(request);
      const input = (request.json as { input: { role: string; content: { text: string }[] }[] }).input;
      const prompt =
        input
          .find((item) => item.role === 'user')
          ?.content.map((part) => part.text)
          .join('') ?? '';
      return { kind: 'turn', text: bodyOf(prompt) };
    };
    await using llm = await startFakeLlmServer(reply, { contextWindow: WINDOW });
    const { model } = resolveModel('openai:gpt-4.1-mini', { openai: { apiKey: 'sk-test-key-for-the-fake-0123456789', baseURL: llm.openaiBaseUrl } });
    let spent: AgentUsage = ZERO_USAGE;

    // Told a window four times the fake's: its first chunks are refused.
    const outcome = await mapLines(
      indexLines(text),
      'Count the ERROR lines.',
      mapping(model, { streams: true, windowTokens: 4 * WINDOW, concurrency: 2, onUsage: (used) => (spent = addUsage(spent, used)) }),
    );

    expect(reassemble(outcome.answers.map((answer) => answer.text))).toEqual(text.split('\n'));
    // Refused at first, the two calls under way at once; after that, sized by the window the refusal named, and never refused again.
    const fits = (request: FakeRequest): boolean => (request.tokens ?? Number.POSITIVE_INFINITY) <= WINDOW;
    expect(llm.requests.filter((request) => !fits(request)).length).toBeGreaterThan(0);
    expect(llm.requests.slice(2).every(fits)).toBe(true);
    expect(answered.length).toBe(outcome.answers.length);
    // Refused requests cost nothing: the usage is what the answered ones reported, each told as it came.
    expect(spent).toEqual(outcome.usage);
    expect(outcome.usage.inputTokens).toBe(answered.reduce((sum, request) => sum + (request.tokens ?? 0), 0));
  });

  it('gives up on a chunk still refused after halving it four times, with CONTEXT_OVERFLOW', async () => {
    let calls = 0;
    const refusing = createMockModel(
      Array.from({ length: 20 }, () => () => {
        calls++;
        throw new APICallError({
          message: 'Bad Request',
          url: 'http://127.0.0.1/v1/responses',
          requestBodyValues: {},
          statusCode: 400,
          responseBody: '{"error":{"code":"context_length_exceeded"}}',
          isRetryable: false,
        });
      }),
    );
    const text = Array.from({ length: 500 }, (_, n) => `line ${n} svc-${n % 13} INFO ok`).join('\n');
    await expect(mapLines(indexLines(text), 'Count the lines.', mapping(refusing, { streams: true, chunkTokens: 2_000 }))).rejects.toMatchObject({
      code: 'CONTEXT_OVERFLOW',
      message: expect.stringMatching(/^The map's call on lines \d+-\d+ was refused as longer than the model's context window, even halved 4 times/),
    });
    // The chunk, then the first half of each half: five refusals, and nothing more sent.
    expect(calls).toBe(5);
  });
});

/** A provider's answer: the call's input as o200k_base counts it (the map counts the same, and 16 tokens of framing), 10 tokens out, after a moment so that calls overlap. */
const counting = (calls: { inFlight: number; most: number; count: number }) => async (options: LanguageModelCallOptions) => {
  const { system, prompt } = sent(options);
  calls.count++;
  calls.most = Math.max(calls.most, ++calls.inFlight);
  await new Promise((resolve) => setTimeout(resolve, 5));
  calls.inFlight--;
  return { stream: convertArrayToReadableStream(mockTurnParts({ text: 'seen', usage: { input: o200k.count(system) + o200k.count(prompt), output: 10 } })) };
};

describe("mapLines within its run's budget", () => {
  const text = Array.from({ length: 4_000 }, (_, n) => `line ${n} svc-${n % 13} INFO ok`).join('\n');

  /** Maps `text` four calls at a time within `budget`, priced at `price`: what was spent, held at most, and the outcome. */
  async function mapWithin(budget: ReturnType<typeof resolveBudget>, price?: ModelPrice) {
    let run: AgentUsage = ZERO_USAGE;
    const holds = createBudgetHolds(budget, price, () => run);
    const calls = { inFlight: 0, most: 0, count: 0 };
    const outcome = await mapLines(
      indexLines(text),
      'Count the lines.',
      mapping(createMockModel(Array.from({ length: 100 }, () => counting(calls))), {
        streams: true,
        chunkTokens: 2_000,
        concurrency: 4,
        onUsage: (used) => (run = addUsage(run, used)),
        reserve: (most) => holds.hold(most),
      }),
    );
    return { run, calls, outcome, refused: holds.refused() };
  }

  it('holds what each call may spend before sending it, four at once, and stops before the next would pass max_tokens', async () => {
    // Room for four calls' most at once, and not for the whole map (about 28,000 tokens).
    const maxTokens = 26_000;
    // Its most: a chunk of 2,000 tokens and the answer's allowance.
    const mostPerCall = 2_000 + ARTIFACT_DEFAULTS.mapAnswerTokens;
    const { run, calls, outcome, refused } = await mapWithin(resolveBudget({ maxTokens }));

    // Before, the calls under way were not counted: four at once passed the budget by up to three calls.
    expect(run.totalTokens).toBeLessThanOrEqual(maxTokens);
    // It stopped only when the next call, whatever it spent, might not have fit.
    expect(run.totalTokens + mostPerCall).toBeGreaterThan(maxTokens);
    expect(calls.most).toBe(4);
    expect(outcome.answers).toHaveLength(calls.count);
    expect(outcome.answers.length).toBeLessThan((await mapWithin(resolveBudget())).calls.count);
    expect(outcome.stopped?.reason).toMatch(
      /^the run's token budget cannot pay for another call: [\d,]+ of 26,000 tokens spent, 0 held by calls under way, and the call may spend [\d,]+$/,
    );
    expect(refused).toEqual({ name: 'tokens', limit: maxTokens, used: run.totalTokens });
    expect(outcome.usage).toEqual(run);
  });

  it('holds max_usd the same way, priced as the run prices usage', async () => {
    const price: ModelPrice = { inputPerMillion: 1, outputPerMillion: 4 };
    const maxCostUsd = 0.03;
    const { run, outcome, refused } = await mapWithin(resolveBudget({ maxCostUsd }), price);

    const spentUsd = costOf(run, price) ?? Number.POSITIVE_INFINITY;
    expect(spentUsd).toBeLessThanOrEqual(maxCostUsd);
    // A call's most costs 2,000 tokens in and the allowance out, at most: the next one would not have fit.
    expect(spentUsd + (2_000 * 1 + ARTIFACT_DEFAULTS.mapAnswerTokens * 4) / 1e6).toBeGreaterThan(maxCostUsd);
    expect(outcome.answers.length).toBeGreaterThan(0);
    expect(outcome.answers.length).toBeLessThan((await mapWithin(resolveBudget())).calls.count);
    expect(outcome.stopped?.reason).toMatch(/^the run's cost budget cannot pay for another call: \$0\.\d{4} of \$0\.03 spent/);
    expect(refused).toEqual({ name: 'cost', limit: maxCostUsd, used: spentUsd });
  });

  it('starts no call when the first one alone could pass the budget', async () => {
    const { run, calls, outcome } = await mapWithin(resolveBudget({ maxTokens: 5_000 }));
    expect(calls.count).toBe(0);
    expect(run).toEqual(ZERO_USAGE);
    expect(outcome.answers).toEqual([]);
    expect(outcome.stopped?.reason).toMatch(/^the run's token budget cannot pay for another call: 0 of 5,000 tokens spent/);
  });

  it('counts what the calls before a failed one used, and what the call it cut off had sent', async () => {
    const told: AgentUsage[] = [];
    const fourth = Promise.withResolvers<void>();
    let calls = 0;
    const model = createMockModel(
      Array.from({ length: 20 }, () => async (options: LanguageModelCallOptions) => {
        calls++;
        if (calls === 3) {
          // It fails once the fourth is under way: that one is cut off.
          await fourth.promise;
          throw new Error('Internal server error');
        }
        if (calls === 4) {
          fourth.resolve();
          return hanging(options);
        }
        return seen();
      }),
    );

    const failing = mapLines(
      indexLines(text),
      'Count the lines.',
      mapping(model, { streams: true, chunkTokens: 2_000, concurrency: 2, onUsage: (used) => told.push(used) }),
    );

    await expect(failing).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: expect.stringMatching(/^The map's call on lines \d+-\d+ failed: Internal server error$/),
    });
    expect(calls).toBe(4);
    expect(told.filter((used) => !used.estimated)).toEqual([
      { inputTokens: 1_000, outputTokens: 10, totalTokens: 1_010, estimated: false },
      { inputTokens: 1_000, outputTokens: 10, totalTokens: 1_010, estimated: false },
    ]);
    // The call cut off: its input, as counted before it was sent.
    const cut = told.filter((used) => used.estimated);
    expect(cut).toHaveLength(1);
    expect(cut[0]).toMatchObject({ outputTokens: 0, estimated: true });
    expect(cut[0]?.inputTokens).toBeGreaterThan(1_500);
  });

  it('cancelled with its task, stops the calls under way, starts no more, and counts what they had sent', async () => {
    const controller = new AbortController();
    const told: AgentUsage[] = [];
    let calls = 0;
    const model = createMockModel(
      Array.from({ length: 20 }, () => (options: LanguageModelCallOptions) => {
        if (++calls === 3) queueMicrotask(() => controller.abort());
        return hanging(options);
      }),
    );

    const cancelled = mapLines(
      indexLines(text),
      'Count the lines.',
      mapping(model, { streams: true, chunkTokens: 2_000, concurrency: 3, signal: controller.signal, onUsage: (used) => told.push(used) }),
    );

    await expect(cancelled).rejects.toMatchObject({ code: 'ABORTED' });
    expect(calls).toBe(3);
    expect(told).toHaveLength(3);
    expect(told.every((used) => used.estimated && used.outputTokens === 0 && used.inputTokens > 1_500)).toBe(true);
  });
});
