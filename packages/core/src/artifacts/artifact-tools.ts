// Klym's built-in tools over a run's artifacts: read a page, grep, query with SQL, map a model over its chunks.
import { tool, zodSchema, type ToolSet } from 'ai';
import { z } from 'zod';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { resultText } from '../tools/tool-result.ts';
import { chunkLabel, mapLines, type ArtifactMapping, type ChunkAnswer, type MapOutcome } from './artifact-map.ts';
import type { ArtifactGrep, ArtifactSlice } from './artifact-store.ts';
import { MAX_RECORD_KEYS, type ArtifactInfo } from './artifact-types.ts';
import { toCsv, toRecords } from './artifact-query.ts';
import { recordsFrom } from './artifact-records.ts';
import { sqlArgument } from './sql-argument.ts';
import { ARTIFACT_TOOL_NAMES, keepBigResult, type ArtifactQuerying, type ResultKeeping } from './result-keeping.ts';
import { countText as count } from '../internal/count-text.ts';

// Built once: every run offers these tools. Wrapped with `zodSchema`, each converts to JSON Schema once; a
// bare zod schema is wrapped anew by the AI SDK at every step of every run, and converted each time.
const READ_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`, from the line that introduced it.'),
    offset: z.number().int().min(0).optional().describe('The first line to give, 0-based.'),
    char_offset: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('Where to start in line `offset`, in characters: to read on inside a long line, as a page that stopped in one says.'),
    limit: z.number().int().min(1).max(ARTIFACT_DEFAULTS.maxReadLines).optional().describe(`How many lines, at most ${ARTIFACT_DEFAULTS.maxReadLines}.`),
  }),
);
const GREP_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`.'),
    pattern: z.string().min(1).max(1_000).describe('An RE2 regular expression (no backreferences or lookarounds).'),
    context: z.number().int().min(0).max(ARTIFACT_DEFAULTS.maxGrepContext).optional().describe('Lines before and after each match. Default 0.'),
    max_matches: z
      .number()
      .int()
      .min(1)
      .max(ARTIFACT_DEFAULTS.maxGrepMatches)
      .optional()
      .describe(`Matches to give at most. Default ${ARTIFACT_DEFAULTS.grepMatches}.`),
  }),
);
const QUERY_INPUT = zodSchema(
  z.strictObject({
    sql: sqlArgument('One SQL query (DuckDB). Each artifact is a table named by its id: `SELECT … FROM art_… …`.'),
  }),
);
const MAP_INPUT = zodSchema(
  z.strictObject({
    artifact: z.string().describe('The artifact id, `art_…`.'),
    instruction: z.string().min(1).max(4_000).describe('What to answer on each chunk.'),
  }),
);

/** A text answer of a built-in tool, kept as an artifact itself when it is big. */
async function answer(toolName: string, text: string, keeping: ResultKeeping): Promise<string> {
  const kept = await keepBigResult(toolName, { content: [{ type: 'text', text }] }, keeping);
  return resultText(kept);
}

/** A page as the model reads it: numbered lines, a part of a line marked with its characters, and where to read on. */
export function sliceText(slice: ArtifactSlice): string {
  const { artifact, offset, lines, next } = slice;
  const last = lines.at(-1);
  const header =
    last === undefined
      ? `artifact ${artifact.id} is empty`
      : `artifact ${artifact.id}, lines ${offset}-${last.n} of ${count(artifact.lines)} (line: text; 0-based; a part of a long line is shown as line[from-to of length]):`;
  const shown = lines.map((line) =>
    line.fromChar === undefined
      ? `${line.n}: ${line.text}`
      : `${line.n}[chars ${line.fromChar}-${line.fromChar + line.text.length} of ${line.length}]: ${line.text}`,
  );
  let footer = '(end of the artifact)';
  if (next !== undefined && next.charOffset !== undefined) {
    footer = `… line ${next.offset} goes on from character ${next.charOffset}: read on with "offset": ${next.offset}, "char_offset": ${next.charOffset}.`;
  } else if (next !== undefined) {
    footer = `… lines ${next.offset} to ${artifact.lines - 1} follow: read on with "offset": ${next.offset}.`;
  }
  return [header, ...shown, footer].join('\n');
}

function grepText(found: ArtifactGrep, pattern: string): string {
  const { artifact, matches, total, lines } = found;
  if (total === 0) return `artifact ${artifact.id}: no line of its ${count(artifact.lines)} matches ${JSON.stringify(pattern)}.`;
  const inLines = lines === total ? '' : ` in ${count(lines)} lines`;
  const parts = [
    `artifact ${artifact.id}: ${count(total)} match${total === 1 ? '' : 'es'} of ${JSON.stringify(pattern)}${inLines} among its ${count(artifact.lines)} lines${matches.length < total ? `; the first ${matches.length} shown` : ''} (line: text; 0-based; in a long line, line[from-to of length] around each match):`,
  ];
  let shownMatches = 0;
  for (const match of matches) {
    const context = match.before.length > 0 || match.after.length > 0;
    if (context) parts.push('--');
    match.before.forEach((line, index) => parts.push(`${match.line - match.before.length + index}- ${line}`));
    if (match.window === undefined) {
      parts.push(`${match.line}: ${match.text}${match.count === undefined ? '' : `   (${match.count} matches in this line)`}`);
      shownMatches += match.count ?? 1;
    } else {
      const { fromChar, matchAt, length } = match.window;
      const end = fromChar + match.text.length;
      parts.push(
        `${match.line}[chars ${fromChar}-${end} of ${length}, match at ${matchAt}]: ${fromChar > 0 ? '…' : ''}${match.text}${end < length ? '…' : ''}`,
      );
      shownMatches++;
    }
    match.after.forEach((line, index) => parts.push(`${match.line + 1 + index}- ${line}`));
  }
  if (total > shownMatches) {
    parts.push(
      `… ${count(total - shownMatches)} more matches not shown: narrow the pattern, raise "max_matches" (at most ${ARTIFACT_DEFAULTS.maxGrepMatches}), or count them exactly with ${ARTIFACT_TOOL_NAMES.query}.`,
    );
  }
  return parts.join('\n');
}

/** What a map says before its answers: how many chunks, what was split, whether it stopped early, and its table. */
function mapHeader(artifact: ArtifactInfo, instruction: string, outcome: MapOutcome, table: ArtifactInfo, columns: readonly string[]): string[] {
  const { answers, splitLines, stopped } = outcome;
  const chunks = `${answers.length} chunk${answers.length === 1 ? '' : 's'}`;
  return [
    stopped === undefined
      ? `artifact ${artifact.id}: ${JSON.stringify(instruction)} answered on each of ${chunks} of its ${count(artifact.lines)} lines, in order:`
      : `artifact ${artifact.id}: the map stopped early (${stopped.reason}): ${JSON.stringify(instruction)} was answered on ${chunks} only, covering ${coverage(answers)} of its ${count(artifact.lines)} lines; the rest was not read.`,
    ...splitLines.map(
      (split) =>
        `Line ${split.line} (${count(split.chars)} characters) was too long for one chunk: it was split over ${split.chunks} consecutive chunks; combine their answers (a record may be cut at a chunk's edge).`,
    ),
    `The answers are also table ${table.id} (columns n, ${columns.join(', ')}; a field an answer lacks is NULL): combine them exactly with ${ARTIFACT_TOOL_NAMES.query} rather than by hand, e.g. SELECT sum(…) FROM ${table.id}.`,
  ];
}

/** Which lines a map's answers covered, as ranges. */
function coverage(answers: readonly ChunkAnswer[]): string {
  const ranges: [number, number][] = [];
  for (const { from, to } of answers) {
    const last = ranges.at(-1);
    if (last !== undefined && from <= last[1] + 1) last[1] = Math.max(last[1], to);
    else ranges.push([from, to]);
  }
  return ranges.map(([from, to]) => `lines ${from}-${to}`).join(', ');
}

/**
 * A map's answers as rows: the lines each covered, its text, and, when the text is a JSON object (the
 * instruction asked for one), its fields, so that adding up per-chunk counts is a query.
 */
function answerRows(answers: readonly ChunkAnswer[]): Record<string, unknown>[] {
  return answers.map((chunk) => {
    const fields = jsonObjectIn(chunk.text);
    const own =
      fields === undefined
        ? {}
        : Object.fromEntries(Object.entries(fields).map(([key, value]) => [['from', 'to', 'answer', 'label'].includes(key) ? `answer_${key}` : key, value]));
    return { from: chunk.from, to: chunk.to, label: chunkLabel(chunk), answer: chunk.text, ...own };
  });
}

/** The JSON object a model's answer is, bare or in a fenced block; `undefined` for anything else. */
function jsonObjectIn(text: string): Record<string, unknown> | undefined {
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/.exec(text.trim());
  const body = (fenced?.[1] ?? text).trim();
  if (!body.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
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
        'Reads a page of an artifact (a big tool result Klym kept whole instead of sending it): from line `offset` (0-based, default 0), ' +
        `\`limit\` lines (default ${ARTIFACT_DEFAULTS.readLines}, at most ${ARTIFACT_DEFAULTS.maxReadLines}). A page stops early when it is full, and ` +
        'a line too long for one page comes in parts; the page ends by saying exactly where to read on (`offset`, and `char_offset` inside a long line).',
      inputSchema: READ_INPUT,
      // A page is never an artifact itself: it is sized under the threshold, so reading one never loops.
      execute: async ({ artifact, offset, limit, char_offset: charOffset }) =>
        sliceText(
          await artifacts.read(artifact, {
            ...(offset === undefined ? {} : { offset }),
            ...(charOffset === undefined ? {} : { charOffset }),
            ...(limit === undefined ? {} : { limit }),
          }),
        ),
    }),
    [ARTIFACT_TOOL_NAMES.grep]: tool({
      description:
        'Finds the lines of an artifact that match a regular expression (RE2 syntax, case-sensitive unless the pattern starts with `(?i)`), ' +
        'with their line numbers (0-based) and `context` lines around each. Use it to find needles in big logs before reading around them.',
      inputSchema: GREP_INPUT,
      execute: async ({ artifact, pattern, context, max_matches: maxMatches }) =>
        answer(
          ARTIFACT_TOOL_NAMES.grep,
          grepText(
            await artifacts.grep(artifact, pattern, { ...(context === undefined ? {} : { context }), ...(maxMatches === undefined ? {} : { maxMatches }) }),
            pattern,
          ),
          keeping,
        ),
    }),
    ...(keeping.query === undefined ? {} : { [ARTIFACT_TOOL_NAMES.query]: queryTool(keeping, keeping.query) }),
    ...(keeping.mapping === undefined ? {} : { [ARTIFACT_TOOL_NAMES.map]: mapTool(keeping, keeping.mapping) }),
  };
}

/**
 * `klym__query_artifact`: exact answers over the artifacts at no model cost. Rows that fit a page come back
 * as CSV; a bigger answer is kept as records (a table to query again, to map or to read) and the model is
 * told how many rows it has and shown the first.
 */
function queryTool(keeping: ResultKeeping, querying: ArtifactQuerying): ToolSet[string] {
  return tool({
    description:
      "Runs one SQL query (DuckDB's dialect) over this task's artifacts and answers its rows as CSV with a header line. Each artifact is a table " +
      'named by its id (`art_…`): a text artifact has columns `n` (the line number, 0-based) and `line`; a JSON artifact kept as records has `n` ' +
      'and one column per key of any record, typed from all its values (nested objects as STRUCTs, `e.service`); other JSON also has `art_…_doc` and `art_…_paths`. ' +
      'Use it for exact counts, sums, group-bys, filters and joins: they cost no model tokens. Text: ' +
      "`regexp_extract(line, 'svc-\\d+')`, `line LIKE '%ERROR%'`. An answer too big to send keeps its first rows as an artifact itself (a table to " +
      'query again, to map, or to read) and says how many rows there were in all. No files, network or extensions.',
    inputSchema: QUERY_INPUT,
    execute: async ({ sql }, { abortSignal }) => {
      const room = keeping.pageTokens;
      // Cheap before exact: CSV of no more characters than the room has no more tokens than it. The query
      // process converts no more rows than that, and keeps the first rows of a bigger answer as JSON lines.
      const page = { pageChars: room * 4, keep: true };
      const found = await querying.query(sql, abortSignal === undefined ? page : { ...page, signal: abortSignal });
      const csv = toCsv(found, room * 4);
      const whole = found.rowCountExact && csv.rows === found.rowCount;
      if (whole && (csv.text.length <= room || keeping.countTokens(csv.text) <= room)) {
        keeping.onQueried?.({ sql, answer: found });
        return `${count(found.rowCount)} row${found.rowCount === 1 ? '' : 's'}${found.tables.length === 0 ? '' : ` from ${found.tables.join(', ')}`} (CSV):\n${csv.text}`;
      }
      // The answer's first rows as a table: all of them when they fit what a query keeps, else as many as fit.
      const layout =
        found.kept === undefined
          ? recordsFrom(toRecords(found))
          : {
              text: found.kept.text,
              records: {
                count: found.kept.rows,
                firstLine: 0,
                path: [],
                keys: found.kept.keys.slice(0, MAX_RECORD_KEYS),
                originalBytes: 0,
                ...(found.kept.types === undefined ? {} : { types: found.kept.types }),
              },
            };
      const keptRows = layout.records.count;
      const kept = await keeping.artifacts.put(ARTIFACT_TOOL_NAMES.query, '', layout);
      keeping.onQueried?.({ sql, answer: found, kept });
      const preview = toCsv(found, Math.floor(room / 4));
      const total = `${found.rowCountExact ? '' : 'more than '}${count(found.rowCount)}`;
      const all = found.rowCountExact && keptRows === found.rowCount;
      return [
        all
          ? `${total} rows, too many to send: kept as artifact ${kept.id}, a table with columns ${found.columns.map((column) => `${column.name} ${column.type}`).join(', ')} (and n, the row's number).`
          : `${total} rows, too many to send or to keep: the first ${count(keptRows)} are kept as artifact ${kept.id}, a table with columns ${found.columns.map((column) => `${column.name} ${column.type}`).join(', ')} (and n, the row's number); ` +
            `the other ${found.rowCountExact ? count(found.rowCount - keptRows) : 'rows'} are not kept: aggregate, filter, or page with LIMIT ${keptRows} OFFSET ${keptRows} to reach them.`,
        `Query it again (SELECT … FROM ${kept.id}), map it with ${ARTIFACT_TOOL_NAMES.map}, or read it with ${ARTIFACT_TOOL_NAMES.read}. The first ${preview.rows} rows (CSV):`,
        preview.text,
      ].join('\n');
    },
  });
}

/** `klym__map_artifact`: the recursive step, a model call per chunk of the artifact. */
function mapTool(keeping: ResultKeeping, mapping: ArtifactMapping): ToolSet[string] {
  return tool({
    description:
      'Answers an instruction on every part of an artifact too big to read: the artifact is cut on line boundaries into chunks that each fit ' +
      'a model call, a model answers `instruction` on each chunk (without tools), and the answers come back in order, each with its line range. ' +
      'Use it for what grep cannot do: counts, summaries, classifications over the whole text. Write the instruction so that answers per chunk ' +
      'can be combined, best as a JSON object (e.g. "count the ERROR lines per service; answer as a JSON object {service: count}"): the answers are also kept ' +
      `as a table (from, to, answer, and the answer's JSON fields) that ${ARTIFACT_TOOL_NAMES.query} adds up exactly. For exact counts over lines or records, ${ARTIFACT_TOOL_NAMES.query} alone is cheaper and exact.`,
    inputSchema: MAP_INPUT,
    execute: async ({ artifact, instruction }) => {
      const { artifact: info, index } = await keeping.artifacts.lines(artifact);
      const outcome = await mapLines(index, instruction, mapping);
      keeping.onMapped?.({ artifact: info, chunks: outcome.answers.length, usage: outcome.usage });
      // The answers are kept as a table whatever their size: the model asked for them, and may add them up.
      const rows = answerRows(outcome.answers);
      const table = await keeping.artifacts.put(ARTIFACT_TOOL_NAMES.map, '', recordsFrom(rows));
      // Every answer's fields, not only the first's: a chunk that saw no ERROR of a service has no key for it.
      const header = mapHeader(info, instruction, outcome, table, [...new Set(rows.flatMap((row) => Object.keys(row)))]);
      const inline = [...header, ...outcome.answers.map((chunk) => `[${chunkLabel(chunk)}] ${chunk.text}`)].join('\n');
      // Inline while they fit a page; past it, the table, and how to read or query it, rather than text to page through.
      if (inline.length <= keeping.pageTokens || keeping.countTokens(inline) <= keeping.pageTokens) return inline;
      return [
        ...header,
        `The ${outcome.answers.length} answers (${count(table.tokens)} tokens) are too many to send: query table ${table.id}, map it, or read it with ${ARTIFACT_TOOL_NAMES.read} { "artifact": "${table.id}" } (one answer per line).`,
      ].join('\n');
    },
  });
}
