import type { ModelMessage, ToolResultPart } from 'ai';
import { clipLine } from './artifact-text.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/** How a run keeps its conversation inside the window. */
export interface Compaction {
  /** The conversation's tokens at most, once compacted: what the window leaves after the system prompt, the tools and the answer. */
  readonly budgetTokens: number;
  /** The latest steps kept whole, whatever they weigh. */
  readonly keepSteps: number;
  /** The conversation's tokens, as the run counts them. */
  readonly measure: (messages: readonly ModelMessage[]) => number;
  /** Keeps a tool result's text as an artifact of the run. */
  readonly keep: (toolName: string, text: string) => Promise<ArtifactInfo>;
}

/** What a compaction did. */
export interface Compacted {
  readonly messages: ModelMessage[];
  /** Tool results replaced by their artifact's reference. */
  readonly results: number;
  /** Steps folded into the digest of earlier steps. */
  readonly steps: number;
  readonly tokensBefore: number;
  readonly tokensAfter: number;
}

/** A result shorter than this is left in place: its reference would save little. */
const SMALL_RESULT_CHARS = 1_000;
const DIGEST_MARK = '[Klym folded earlier steps into this digest to keep the conversation inside the model context window. What they did:]';
const DIGEST_ITEM_CHARS = 240;
/** The digest's share of the budget, at most: past it, its oldest lines go (counted). */
const DIGEST_SHARE = 0.25;

/** The digest message: its mark, then its newest lines within `maxChars`, the older ones counted. */
function digestText(lines: readonly string[], maxChars: number): string {
  const kept: string[] = [];
  let chars = 0;
  for (let index = lines.length - 1; index >= 0; index--) {
    const line = lines[index] as string;
    if (chars + line.length + 1 > maxChars) {
      kept.unshift(`- … ${index + 1} earlier lines of this digest left out`);
      break;
    }
    kept.unshift(line);
    chars += line.length + 1;
  }
  return `${DIGEST_MARK}\n${kept.join('\n')}`;
}

type Output = ToolResultPart['output'];

/** A result's text, when it is text the model reads (not an error, not media). */
function outputText(output: Output): string | undefined {
  if (output.type === 'text') return output.value;
  if (output.type === 'content' && output.value.every((item) => item.type === 'text'))
    return output.value.map((item) => (item as { text: string }).text).join('\n');
  return undefined;
}

/** Whether a result's text is worth moving out: big enough, and not already a short reference. */
function worthMoving(text: string): boolean {
  return text.length >= SMALL_RESULT_CHARS && !/^artifact art_[0-9a-f]{12}: [^\n]*moved out of the conversation/.test(text);
}

/** A result already kept as an artifact: the first line of its reference names it. */
const referenced = (text: string): string | undefined => /^artifact (art_[0-9a-f]{12}): [^\n]*/.exec(text)?.[0];

function shortReference(line: string, tool: string): string {
  return `${line.replace(/ — the whole result of .*$/, '')} — the result of ${tool}, moved out of the conversation to keep it inside the window; read it with klym__read_artifact or klym__grep_artifact.`;
}

/**
 * `messages` compacted to `budgetTokens`, or `undefined` when they fit already. First, from the oldest, tool
 * results outside the latest `keepSteps` steps are replaced by a one-line reference to their artifact
 * (kept first when they are not yet one); then, if that is not enough, the oldest steps after the run's
 * prompt are folded into one digest message just after it (what each called and said, a line each).
 * Everything up to and including the prompt (the task: the caller's earlier turns, then the prompt, which
 * {@link promptIndex} finds) is never folded, and the latest steps stay whole; only a big tool result of an
 * earlier turn may be moved out like any other. Whole steps are folded, so every tool call keeps its result.
 */
export async function compactHistory(messages: readonly ModelMessage[], compaction: Compaction): Promise<Compacted | undefined> {
  const before = compaction.measure(messages);
  if (before <= compaction.budgetTokens) return undefined;
  const starts = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
  if (starts.length <= compaction.keepSteps) return undefined;
  const head = starts[0] as number;
  const keptFrom = starts[starts.length - compaction.keepSteps] as number;
  const out = [...messages];
  let results = 0;

  const names = new Map<string, string>();
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const part of message.content) if (part.type === 'tool-call') names.set(part.toolCallId, part.toolName);
  }
  for (let index = head; index < keptFrom && compaction.measure(out) > compaction.budgetTokens; index++) {
    const message = out[index] as ModelMessage;
    if (message.role !== 'tool') continue;
    let changed = false;
    const content = [];
    for (const part of message.content) {
      const text = part.type === 'tool-result' ? outputText(part.output) : undefined;
      if (part.type !== 'tool-result' || text === undefined || !worthMoving(text)) {
        content.push(part);
        continue;
      }
      const tool = names.get(part.toolCallId) ?? part.toolName;
      let line = referenced(text);
      if (line === undefined) {
        const artifact = await compaction.keep(tool, text);
        line = `artifact ${artifact.id}: ${artifact.bytes} bytes, ${artifact.lines} lines, ${artifact.tokens} tokens`;
      }
      content.push({ ...part, output: { type: 'text' as const, value: shortReference(line, tool) } });
      changed = true;
      results++;
    }
    if (changed) out[index] = { ...message, content };
  }

  let steps = 0;
  let folded = out;
  // The run's own steps: those after its prompt (moving results out above changed no index).
  const prompt = promptIndex(out);
  const foldable = starts.filter((start) => start > prompt && start < keptFrom);
  const first = foldable[0];
  if (first !== undefined && compaction.measure(out) > compaction.budgetTokens) {
    // An earlier compaction's digest, just after the prompt and before the first step, is continued rather than repeated.
    const earlier = out[first - 1];
    const continued = isDigest(earlier);
    const digest: string[] = continued ? (earlier.content as string).split('\n').slice(1) : [];
    const maxDigestChars = Math.floor(compaction.budgetTokens * DIGEST_SHARE * 2.5);
    // Whole steps, oldest first, until what is left fits (the digest's own weight counted).
    for (let step = 0; step < foldable.length; step++) {
      const end = foldable[step + 1] ?? keptFrom;
      for (const message of out.slice(foldable[step], end)) digest.push(...digestLines(message));
      steps++;
      folded = [...out.slice(0, continued ? first - 1 : first), { role: 'user', content: digestText(digest, maxDigestChars) }, ...out.slice(end)];
      if (compaction.measure(folded) <= compaction.budgetTokens) break;
    }
  }
  return { messages: folded, results, steps, tokensBefore: before, tokensAfter: compaction.measure(folded) };
}

/** Whether `message` is a digest a compaction wrote. */
function isDigest(message: ModelMessage | undefined): message is ModelMessage & { role: 'user'; content: string } {
  return message?.role === 'user' && typeof message.content === 'string' && message.content.startsWith(DIGEST_MARK);
}

/**
 * The index of the run's own prompt: the last user message that is not a digest, or -1. `runAgent` puts the
 * prompt after the caller's earlier `messages`, and after it a run adds only assistant and tool messages and
 * the digest, so the prompt is found the same way in a checkpoint a resumed run goes on from, with nothing
 * kept beside the messages.
 */
function promptIndex(messages: readonly ModelMessage[]): number {
  return messages.findLastIndex((message) => message.role === 'user' && !isDigest(message));
}

/** What a message of a folded step did, a line each. */
function digestLines(message: ModelMessage): string[] {
  if (typeof message.content === 'string') return [`- ${message.role}: ${clipLine(message.content, DIGEST_ITEM_CHARS)}`];
  const lines: string[] = [];
  for (const part of message.content) {
    if (part.type === 'text' && part.text.trim() !== '') lines.push(`- said: ${clipLine(part.text.replace(/\s+/g, ' '), DIGEST_ITEM_CHARS)}`);
    else if (part.type === 'tool-call') lines.push(`- called ${part.toolName} ${clipLine(JSON.stringify(part.input), DIGEST_ITEM_CHARS)}`);
    else if (part.type === 'tool-result') {
      const text = outputText(part.output) ?? `[${part.output.type}]`;
      lines.push(`  → ${clipLine((text.split('\n')[0] ?? '').trim(), DIGEST_ITEM_CHARS)}`);
    }
  }
  return lines;
}
