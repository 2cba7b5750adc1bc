// A big tool result kept as an artifact: the reference the model is given in its place, and how a run keeps one.
import type { CallToolResult } from '@modelcontextprotocol/client';
import type { AgentUsage } from '../agent/types.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import { resultText } from '../tools/tool-result.ts';
import { clipLine, hasMoreTokens, sampledTokens, type LineIndex } from './artifact-text.ts';
import type { TokenizerName } from '../agent/token-count.ts';
import type { ArtifactMapping } from './artifact-map.ts';
import type { ArtifactStore } from './artifact-store.ts';
import { MAX_RECORD_KEYS, type ArtifactInfo, type ArtifactRecords, type QueryPage } from './artifact-types.ts';
import type { QueryAnswer } from './artifact-query.ts';
import { duckType, type ColumnType } from './record-types.ts';
import { recordColumns } from './query-tables.ts';
import { countText as count } from '../internal/count-text.ts';

/** The names of Klym's built-in tools over artifacts, offered to every run. */
export const ARTIFACT_TOOL_NAMES = {
  read: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}read_artifact`,
  grep: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}grep_artifact`,
  map: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}map_artifact`,
  query: `${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}query_artifact`,
} as const;

/** How a run keeps big results: where, and from how many tokens on. */
export interface ResultKeeping {
  readonly artifacts: ArtifactStore;
  /** A result of more tokens than this becomes an artifact. */
  readonly thresholdTokens: number;
  readonly countTokens: (text: string) => number;
  /** Which tokenizer `countTokens` is: a reference says whether its token count is the model's own or an estimate. @default 'estimate' */
  readonly tokenizer?: TokenizerName;
  /** A result's text (a run's remembers each result's). @default `resultText` */
  readonly resultText?: (result: CallToolResult) => string;
  /** Told of each artifact kept, with its first lines (for the run's events). */
  readonly onKept?: (artifact: ArtifactInfo, head: readonly string[]) => void;
  /** How `klym__map_artifact` calls a model on each chunk; without it, the tool is not offered. */
  readonly mapping?: ArtifactMapping;
  /** Runs SQL over the run's artifacts, each a table; without it, `klym__query_artifact` is not offered. */
  readonly query?: ArtifactQuerying;
  /** Told of each query answered (for the run's events). */
  readonly onQueried?: (query: { readonly sql: string; readonly answer: QueryAnswer; readonly kept?: ArtifactInfo }) => void;
  /** Tokens of an answer the model reads inline at most: a page, a query's rows (a run keeps it under its threshold). */
  readonly pageTokens: number;
  /** Told of each map once its answers are in, with what its model calls used (for the run's event: the usage reached the run as it came, through `mapping.onUsage`). */
  readonly onMapped?: (map: { readonly artifact: ArtifactInfo; readonly chunks: number; readonly usage: AgentUsage }) => void;
}

/** What runs a run's queries: its task's DuckDB, wherever it is (`artifact-query.ts`). */
export interface ArtifactQuerying {
  query(sql: string, options?: QueryPage & { readonly signal?: AbortSignal }): Promise<QueryAnswer>;
}

/**
 * What the model is given in a big result's place: a first line naming the artifact with its size in
 * bytes, lines and tokens; for JSON, the records it holds and their keys; its table for
 * `klym__query_artifact`; then its first and last lines, and how to read the rest.
 */
export function artifactReference(
  artifact: ArtifactInfo,
  index: LineIndex,
  options: { readonly queries?: boolean; readonly tokenizer?: TokenizerName } = {},
): string {
  const shown = ARTIFACT_DEFAULTS.previewLines;
  const line = (n: number): string => `${n}: ${clipLine(index.line(n), ARTIFACT_DEFAULTS.maxLineChars)}`;
  const head: string[] = [];
  for (let n = 0; n < Math.min(shown, index.count); n++) head.push(line(n));
  const tail: string[] = [];
  for (let n = Math.max(shown, index.count - shown); n < index.count; n++) tail.push(line(n));
  const long = head.some((text) => text.endsWith(' more characters]')) || tail.some((text) => text.endsWith(' more characters]'));
  return [
    `artifact ${artifact.id}: ${count(artifact.bytes)} bytes, ${count(artifact.lines)} lines, ${tokensOf(artifact, options.tokenizer ?? 'estimate')} — the whole result of ${artifact.tool}, kept out of this conversation because it is too big to send.`,
    ...(artifact.records === undefined ? [] : [recordsLine(artifact.records)]),
    ...(options.queries === true ? [`Query it with SQL as table ${artifact.id}: ${tableColumns(artifact)}.`] : []),
    `First lines (line: text; 0-based):`,
    ...head,
    ...(tail.length === 0
      ? []
      : [index.count > shown * 2 ? `… ${count(index.count - shown * 2)} lines not shown …` : '', 'Last lines:', ...tail].filter((part) => part !== '')),
    `Read lines with ${ARTIFACT_TOOL_NAMES.read} { "artifact": "${artifact.id}", "offset": <first line>, "limit": <lines, at most ${ARTIFACT_DEFAULTS.maxReadLines}>${long ? ', "char_offset": <where to start inside line "offset">' : ''} }; search it with ${ARTIFACT_TOOL_NAMES.grep} { "artifact": "${artifact.id}", "pattern": "<RE2 regular expression>" }${options.queries === true ? `; count, sum and filter it exactly with ${ARTIFACT_TOOL_NAMES.query} { "sql": "SELECT … FROM ${artifact.id} …" }` : ''}.`,
  ].join('\n');
}

/** An artifact's tokens as a reference says them: counted by the model's tokenizer, or how they were estimated. */
function tokensOf(artifact: ArtifactInfo, tokenizer: TokenizerName): string {
  if (tokenizer !== 'o200k_base') return `about ${count(artifact.tokens)} tokens (estimated)`;
  return sampledTokens(artifact.bytes) ? `about ${count(artifact.tokens)} tokens (${tokenizer}, sampled)` : `${count(artifact.tokens)} tokens (${tokenizer})`;
}

function recordsLine(records: ArtifactRecords): string {
  const where =
    records.firstLine === 0
      ? 'the document was an array'
      : `line 0 holds the rest of the document, the array was at ${records.path.map((key) => JSON.stringify(key)).join('.')}`;
  const names = records.types === undefined ? records.keys : keyPaths(records.types);
  const keys =
    names.length === 0
      ? 'no keys'
      : `keys ${names.slice(0, MAX_RECORD_KEYS).join(', ')}${names.length > MAX_RECORD_KEYS ? `, … (${names.length} in all)` : ''}`;
  const last = records.firstLine + records.count - 1;
  const size = records.originalBytes > 0 ? ` (${count(records.originalBytes)} bytes as the tool gave it)` : '';
  return `It is JSON${size}, kept as ${count(records.count)} records, one compact object per line (lines ${records.firstLine}-${last}); ${records.types === undefined ? 'the first has' : 'its records have'} ${keys}; ${where}.`;
}

/** Every key of `types`, a nested object's as `parent.child` (three levels at most), as a records line names them. */
function keyPaths(types: { readonly [key: string]: ColumnType }, prefix = '', depth = 0): string[] {
  return Object.entries(types).flatMap(([key, type]) =>
    typeof type === 'object' && !Array.isArray(type) && depth < 2
      ? keyPaths(type as { readonly [key: string]: ColumnType }, `${prefix}${key}.`, depth + 1)
      : [`${prefix}${key}`],
  );
}

/** Columns of a records table the model is told at once; past them it is told how to list them all. */
const SHOWN_COLUMNS = 40;

/** An artifact's tables as the model is told them: their columns with their types, and a query that runs on it. */
export function tableColumns(artifact: ArtifactInfo): string {
  if (artifact.json === 'document') {
    const id = artifact.id;
    return (
      `columns n (the line number, 0-based), line (its text). It is one JSON document, so also table ${id}_doc (one row: doc, its JSON text, ` +
      `the whole value, for DuckDB's JSON functions: doc->'$.key', json_keys(doc, '$.key')) and table ${id}_paths (a row per value: ` +
      `path as a JSON path like $.a.b[0], key, type as json_type names it, value: a scalar's text, NULL for an object or array, depth: 0 for the root); ` +
      `its top-level keys: SELECT key, type FROM ${id}_paths WHERE depth = 1`
    );
  }
  if (artifact.records === undefined) return 'columns n (the line number, 0-based), line (its text)';
  const { types } = artifact.records;
  if (types !== undefined) {
    const columns = recordColumns(types);
    if (columns === undefined) return 'columns n (the line number, as the line tools number it), record (JSON), one row per record';
    const listed = columns.names.map((name, at) => `${name} ${duckType(Object.values(types)[at] as ColumnType)}`);
    const shown = listed.slice(0, SHOWN_COLUMNS);
    const json = listed.some((column) => column.endsWith(' JSON'))
      ? `; a JSON column's values disagree in type and are kept exactly: compare its text (col->>'$' = 'x') or cast it (TRY_CAST(col->>'$' AS DOUBLE))`
      : '';
    const more = listed.length > shown.length ? `, … and ${listed.length - shown.length} more (DESCRIBE ${artifact.id} lists them all)` : '';
    return `columns n (the line number, as the line tools number it), ${shown.join(', ')}${more}, one row per record, each column typed from every record's value${json}`;
  }
  const columns = new Map<string, string[]>();
  for (const key of artifact.records.keys) {
    const [top, ...rest] = key.split('.') as [string, ...string[]];
    const fields = columns.get(top) ?? [];
    if (rest.length > 0) fields.push(rest.join('.'));
    columns.set(top, fields);
  }
  const listed = [...columns].map(([name, fields]) => (fields.length === 0 ? name : `${name} STRUCT(${fields.join(', ')})`));
  return `columns n (the line number, as the line tools number it), ${listed.join(', ')}, one row per record (nested fields as ${[...columns].find(([, fields]) => fields.length > 0)?.[0] ?? 'x'}.field)`;
}

/**
 * `result`, or, when its text passes the threshold, the same result with its text kept as an artifact and
 * the model given {@link artifactReference} instead (images and audio stay). An error result stays as it is.
 * @throws {KlymError} `ARTIFACT_LIMIT` when the task may keep no more
 */
export async function keepBigResult(toolName: string, result: CallToolResult, keeping: ResultKeeping): Promise<CallToolResult> {
  return (await keepResult(toolName, result, keeping)).result;
}

/**
 * {@link keepBigResult}, also saying which artifact the result was kept as (none when it was sent as it is).
 * @throws {KlymError} `ARTIFACT_LIMIT` when the task may keep no more
 */
export async function keepResult(
  toolName: string,
  result: CallToolResult,
  keeping: ResultKeeping,
): Promise<{ readonly result: CallToolResult; readonly artifact?: ArtifactInfo }> {
  if (result.isError === true) return { result };
  const text = (keeping.resultText ?? resultText)(result);
  if (!hasMoreTokens(text, keeping.thresholdTokens, keeping.countTokens)) return { result };
  // A result that is only structuredContent is kept as its JSON, so that its records are found as in a text's.
  const structuredOnly = result.structuredContent !== undefined && !(result.content ?? []).some((item) => item.type === 'text');
  const kept = await keeping.artifacts.put(toolName, structuredOnly ? JSON.stringify(result.structuredContent) : text);
  // The store keeps what it just kept indexed: its lines are the records' when it was JSON.
  const { artifact, index } = await keeping.artifacts.lines(kept.id);
  keeping.onKept?.(artifact, headLines(index));
  const media = (result.content ?? []).filter((item) => item.type === 'image' || item.type === 'audio');
  const told = { queries: keeping.query !== undefined, ...(keeping.tokenizer === undefined ? {} : { tokenizer: keeping.tokenizer }) };
  return { result: { content: [{ type: 'text', text: artifactReference(artifact, index, told) }, ...media] }, artifact };
}

/** The first five lines of an artifact, each cut at 200 characters. */
function headLines(index: LineIndex): string[] {
  const lines: string[] = [];
  for (let n = 0; n < Math.min(5, index.count); n++) lines.push(clipLine(index.line(n), 200));
  return lines;
}
