import type { CallToolResult } from '@modelcontextprotocol/client';
import { tool, zodSchema, type ToolSet } from 'ai';
import { z } from 'zod';
import type { AgentUsage } from '../agent/types.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import { resultText } from '../tools/tool-result.ts';
import { clipLine, indexLines } from './artifact-text.ts';
import { mapLines, type ArtifactMapping, type ChunkAnswer } from './artifact-map.ts';
import type { ArtifactGrep, ArtifactSlice, ArtifactStore } from './artifact-store.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/** The names of Klym's built-in tools over artifacts, offered to every run. */
export const ARTIFACT_TOOL_NAMES = {
  read: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}read_artifact`,
  grep: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}grep_artifact`,
  map: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}map_artifact`,
} as const;

/** How a run keeps big results: where, and from how many tokens on. */
export interface ResultKeeping {
  readonly artifacts: ArtifactStore;
  /** A result of more tokens than this becomes an artifact. */
  readonly thresholdTokens: number;
  readonly countTokens: (text: string) => number;
  /** A result's text (a run's remembers each result's). @default `resultText` */
  readonly resultText?: (result: CallToolResult) => string;
  /** Told of each artifact kept, with its first lines (for the run's events). */
  readonly onKept?: (artifact: ArtifactInfo, head: readonly string[]) => void;
  /** How `klym__map_artifact` calls a model on each chunk; without it, the tool is not offered. */
  readonly mapping?: ArtifactMapping;
  /** Told of each map once its answers are in, with what its model calls used (for the run's budget). */
  readonly onMapped?: (map: { readonly artifact: ArtifactInfo; readonly chunks: number; readonly usage: AgentUsage }) => void;
}

// Built once: every run offers these tools. Wrapped with `zodSchema`, each converts to JSON Schema once; a
// bare zod schema is wrapped anew by the AI SDK at every step of every run, and converted each time.
const READ_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`, from the line that introduced it.'),
    offset: z.number().int().min(0).optional().describe('The first line to give, 0-based.'),
    limit: z.number().int().min(1).optional().describe(`How many lines, at most ${ARTIFACT_DEFAULTS.maxReadLines}.`),
  }),
);
const GREP_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`.'),
    pattern: z.string().min(1).max(1_000).describe('An RE2 regular expression (no backreferences or lookarounds).'),
    context: z.number().int().min(0).max(ARTIFACT_DEFAULTS.maxGrepContext).optional().describe('Lines before and after each match. Default 0.'),
    max_matches: z.number().int().min(1).max(ARTIFACT_DEFAULTS.maxGrepMatches).optional().describe(`Matches to give at most. Default ${ARTIFACT_DEFAULTS.grepMatches}.`),
  }),
);
const MAP_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`.'),
    instruction: z.string().min(1).max(4_000).describe('What to answer on each chunk.'),
  }),
);

const count = (value: number): string => value.toLocaleString('en-US');

/**
 * What the model is given in a big result's place: a first line naming the artifact with its size in
 * bytes, lines and tokens, then its first and last lines, and how to read the rest.
 */
export function artifactReference(artifact: ArtifactInfo, text: string): string {
  const index = indexLines(text);
  const shown = ARTIFACT_DEFAULTS.previewLines;
  const line = (n: number): string => `${n}: ${clipLine(index.line(n), ARTIFACT_DEFAULTS.maxLineChars)}`;
  const head: string[] = [];
  for (let n = 0; n < Math.min(shown, index.count); n++) head.push(line(n));
  const tail: string[] = [];
  for (let n = Math.max(shown, index.count - shown); n < index.count; n++) tail.push(line(n));
  return [
    `artifact ${artifact.id}: ${count(artifact.bytes)} bytes, ${count(artifact.lines)} lines, ${count(artifact.tokens)} tokens — the whole result of ${artifact.tool}, kept out of this conversation because it is too big to send.`,
    `First lines (line: text; 0-based):`,
    ...head,
    ...(tail.length === 0 ? [] : [index.count > shown * 2 ? `… ${count(index.count - shown * 2)} lines not shown …` : '', 'Last lines:', ...tail].filter((part) => part !== '')),
    `Read lines with ${ARTIFACT_TOOL_NAMES.read} { "artifact": "${artifact.id}", "offset": <first line>, "limit": <lines, at most ${ARTIFACT_DEFAULTS.maxReadLines}> }; search it with ${ARTIFACT_TOOL_NAMES.grep} { "artifact": "${artifact.id}", "pattern": "<RE2 regular expression>" }.`,
  ].join('\n');
}

/**
 * `result`, or, when its text passes the threshold, the same result with its text kept as an artifact and
 * the model given {@link artifactReference} instead (images and audio stay). An error result stays as it is.
 * @throws {KlymError} `ARTIFACT_LIMIT` when the task may keep no more
 */
export async function keepBigResult(toolName: string, result: CallToolResult, keeping: ResultKeeping): Promise<CallToolResult> {
  if (result.isError === true) return result;
  const text = (keeping.resultText ?? resultText)(result);
  // Cheap before exact: a text under the threshold in characters is under it in tokens.
  if (text.length <= keeping.thresholdTokens || keeping.countTokens(text) <= keeping.thresholdTokens) return result;
  const artifact = await keeping.artifacts.put(toolName, text);
  keeping.onKept?.(artifact, headLines(text));
  const media = (result.content ?? []).filter((item) => item.type === 'image' || item.type === 'audio');
  return { content: [{ type: 'text', text: artifactReference(artifact, text) }, ...media] };
}

/** The first five lines of `text`, each cut at 200 characters, found without indexing the whole text. */
function headLines(text: string): string[] {
  const lines: string[] = [];
  let at = 0;
  while (lines.length < 5 && at < text.length) {
    const end = text.indexOf('\n', at);
    lines.push(clipLine(text.slice(at, end === -1 ? text.length : end).replace(/\r$/, ''), 200));
    if (end === -1) break;
    at = end + 1;
  }
  return lines;
}

/** A text answer of a built-in tool, kept as an artifact itself when it is big. */
async function answer(toolName: string, text: string, keeping: ResultKeeping): Promise<string> {
  const kept = await keepBigResult(toolName, { content: [{ type: 'text', text }] }, keeping);
  return resultText(kept);
}

function sliceText(slice: ArtifactSlice): string {
  const { artifact, offset, lines } = slice;
  const last = offset + lines.length - 1;
  const header = lines.length === 0 ? `artifact ${artifact.id} is empty` : `artifact ${artifact.id}, lines ${offset}-${last} of ${count(artifact.lines)} (line: text; 0-based):`;
  const footer = slice.more ? `… lines ${last + 1} to ${artifact.lines - 1} follow: read on with "offset": ${last + 1}.` : '(end of the artifact)';
  return [header, ...lines.map((line, index) => `${offset + index}: ${line}`), footer].join('\n');
}

function grepText(found: ArtifactGrep, pattern: string): string {
  const { artifact, matches, total } = found;
  if (total === 0) return `artifact ${artifact.id}: no line of its ${count(artifact.lines)} matches ${JSON.stringify(pattern)}.`;
  const parts = [`artifact ${artifact.id}: ${count(total)} of its ${count(artifact.lines)} lines match ${JSON.stringify(pattern)}${total > matches.length ? `; the first ${matches.length}` : ''} (line: text; 0-based):`];
  for (const match of matches) {
    const context = match.before.length > 0 || match.after.length > 0;
    if (context) parts.push('--');
    match.before.forEach((line, index) => parts.push(`${match.line - match.before.length + index}- ${line}`));
    parts.push(`${match.line}: ${match.text}`);
    match.after.forEach((line, index) => parts.push(`${match.line + 1 + index}- ${line}`));
  }
  if (total > matches.length) parts.push(`… ${count(total - matches.length)} more matching lines: narrow the pattern, or raise "max_matches" (at most ${ARTIFACT_DEFAULTS.maxGrepMatches}).`);
  return parts.join('\n');
}

function mapText(artifact: ArtifactInfo, instruction: string, answers: readonly ChunkAnswer[]): string {
  return [
    `artifact ${artifact.id}: ${JSON.stringify(instruction)} answered on each of ${answers.length} chunk${answers.length === 1 ? '' : 's'} of its ${count(artifact.lines)} lines, in order:`,
    ...answers.map((chunk) => `[lines ${chunk.from}-${chunk.to}] ${chunk.text}`),
  ].join('\n');
}

/**
 * Klym's built-in tools over the run's artifacts: `klym__read_artifact { artifact, offset?, limit? }`,
 * `klym__grep_artifact { artifact, pattern, context?, max_matches? }`, and, with a `mapping`,
 * `klym__map_artifact { artifact, instruction }`. A bad pattern, an offset past the
 * end or an unknown artifact (another task's included) is a tool error the model reads; their own big
 * answers become artifacts too.
 */
export function artifactTools(keeping: ResultKeeping): ToolSet {
  const { artifacts } = keeping;
  return {
    [ARTIFACT_TOOL_NAMES.read]: tool({
      description:
        'Reads lines of an artifact (a big tool result Klym kept whole instead of sending it): from line `offset` (0-based, default 0), ' +
        `\`limit\` lines (default ${ARTIFACT_DEFAULTS.readLines}, at most ${ARTIFACT_DEFAULTS.maxReadLines}); long lines are cut.`,
      inputSchema: READ_INPUT,
      execute: async ({ artifact, offset, limit }) => answer(ARTIFACT_TOOL_NAMES.read, sliceText(await artifacts.read(artifact, offset, limit)), keeping),
    }),
    [ARTIFACT_TOOL_NAMES.grep]: tool({
      description:
        'Finds the lines of an artifact that match a regular expression (RE2 syntax, case-sensitive unless the pattern starts with `(?i)`), ' +
        'with their line numbers (0-based) and `context` lines around each. Use it to find needles in big logs before reading around them.',
      inputSchema: GREP_INPUT,
      execute: async ({ artifact, pattern, context, max_matches: maxMatches }) =>
        answer(
          ARTIFACT_TOOL_NAMES.grep,
          grepText(await artifacts.grep(artifact, pattern, { ...(context === undefined ? {} : { context }), ...(maxMatches === undefined ? {} : { maxMatches }) }), pattern),
          keeping,
        ),
    }),
    ...(keeping.mapping === undefined ? {} : { [ARTIFACT_TOOL_NAMES.map]: mapTool(keeping, keeping.mapping) }),
  };
}

/** `klym__map_artifact`: the recursive step, a model call per chunk of the artifact. */
function mapTool(keeping: ResultKeeping, mapping: ArtifactMapping): ToolSet[string] {
  return tool({
    description:
      'Answers an instruction on every part of an artifact too big to read: the artifact is cut on line boundaries into chunks that each fit ' +
      'a model call, a model answers `instruction` on each chunk (without tools), and the answers come back in order, each with its line range. ' +
      'Use it for what grep cannot do: counts, summaries, classifications over the whole text. Write the instruction so that answers per chunk ' +
      'can be combined (e.g. "count the ERROR lines per service; answer as service=count pairs"). Answers too big together become an artifact you can map again.',
    inputSchema: MAP_INPUT,
    execute: async ({ artifact, instruction }) => {
      const { artifact: info, index } = await keeping.artifacts.lines(artifact);
      const { answers, usage } = await mapLines(index, instruction, mapping);
      keeping.onMapped?.({ artifact: info, chunks: answers.length, usage });
      return answer(ARTIFACT_TOOL_NAMES.map, mapText(info, instruction, answers), keeping);
    },
  });
}
