// Scenario 10's model: the agents a local fake of the OpenAI API plays, one per path, each doing what the tools'
// own words tell a model to do. Each fetches its input (kept as an artifact, the model given a reference), then:
// - query: counts with one `klym__query_artifact`, writing SQL from the table the reference names;
// - map: maps the artifact with `klym__map_artifact`, each chunk's answer a JSON object {service: count} as the
//   map's description advises, then adds the answers up with one `klym__query_artifact` over the map's table
//   (as the map's answer says: "combine them exactly with klym__query_artifact rather than by hand");
// - grep: finds a trace's event with `klym__grep_artifact`.
// Each chunk of a map is answered exactly, after 300 ms, with its tokens as usage.
import type { FakeReply, FakeRequest } from '../test/support/fake-llm-server.ts';

/** How long the fake takes to answer one chunk of a map. */
export const MAP_CALL_MS = 300;
/** The graph question's query: every Event node, one line of JSON (issue #31). */
export const GRAPH_QUERY = 'MATCH (e:Event) RETURN e';

/** One of the fake's agents: the reply to each request of its run. */
export type Agent = (request: FakeRequest) => FakeReply;

/** What an agent needs to know of its input: how to fetch it, and how to count its errors per service. */
export interface HeavyInput {
  /** The tool call that brings the input in. */
  readonly fetch: { readonly name: string; readonly args: unknown };
  /** What each chunk of a map is asked. */
  readonly instruction: string;
  /** The SQL counting errors per service in artifact `table`, as the columns its reference names invite. */
  readonly errorsSql: (table: string) => string;
  /** Errors per service in a map chunk's prompt. */
  readonly chunkErrors: (prompt: string) => Map<string, number>;
}

const tally = (matches: Iterable<RegExpMatchArray>): Map<string, number> => {
  const counts = new Map<string, number>();
  for (const match of matches) counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + 1);
  return counts;
};

/** A log read whole by server-filesystem: an artifact of lines, its table `n`, `line`. */
export const logInput = (file: string): HeavyInput => ({
  fetch: { name: 'files__read_text_file', args: { path: file } },
  instruction: 'Count the ERROR lines per service; answer as a JSON object {service: count}.',
  errorsSql: (table) =>
    String.raw`SELECT regexp_extract(line, 'svc-\d+') AS service, count(*) AS errors FROM ${table} WHERE line LIKE '% ERROR %' GROUP BY ALL ORDER BY service`,
  chunkErrors: (prompt) => tally(prompt.matchAll(/^\d+: \S+ (svc-\d+) ERROR /gm)),
});

/** The graph's Event nodes from grynya's `query_graph`: an artifact of records, its table `n`, `e` (a STRUCT). */
export const graphInput: HeavyInput = {
  fetch: { name: 'grynya__query_graph', args: { query: GRAPH_QUERY } },
  instruction: 'Count the events whose severity is error, per service; answer as a JSON object {service: count}.',
  errorsSql: (table) => `SELECT e.service AS service, count(*) AS errors FROM ${table} WHERE e.severity = 'error' GROUP BY ALL ORDER BY service`,
  chunkErrors: (prompt) => tally(prompt.matchAll(/"service":"(svc-[a-z]+)","severity":"error"/g)),
};

/** Every string in a request's JSON: the prompt and the tool results the model was given among them, unescaped. */
function stringsOf(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsOf(item, into);
  else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) stringsOf(item, into);
  return into;
}

/** What a request's conversation holds so far: the input's artifact, and the answers of the built-in tools. */
interface Seen {
  readonly strings: readonly string[];
  /** The artifact the input was kept as, from the reference that replaced it. */
  readonly artifact: string | undefined;
  /** A query's answer: `<N> rows from art_… (CSV):` and the rows. */
  readonly rows: string | undefined;
}

function seen(request: FakeRequest): Seen {
  const strings = stringsOf(request.json);
  const reference = strings.find((text) => /^artifact art_[0-9a-f]{12}: [\d,]+ bytes/.test(text));
  return {
    strings,
    artifact: reference === undefined ? undefined : /^artifact (art_[0-9a-f]{12})/.exec(reference)?.[1],
    rows: strings.find((text) => /^[\d,]+ rows? from art_/.test(text)),
  };
}

/** The answer's rows without the CSV's header: `service,errors` lines. */
const rowsOf = (answer: string): string => answer.split('\n').slice(2).join('\n');

/** A map call, answered exactly: errors per service in the chunk, as a JSON object (or `nothing`, as the map's system prompt asks). */
function chunkReply(input: HeavyInput, request: FakeRequest, strings: readonly string[]): FakeReply | undefined {
  if (!strings.some((text) => text.startsWith('You are given one chunk of a larger text'))) return undefined;
  const counts = input.chunkErrors(strings.find((text) => text.startsWith('Instruction: ')) ?? '');
  return {
    kind: 'turn',
    text: counts.size === 0 ? 'nothing' : JSON.stringify(Object.fromEntries(counts)),
    usage: { input: request.tokens ?? 0, output: 20 },
    delayMs: MAP_CALL_MS,
  };
}

/** Counts errors per service with one query over the input's table. */
export function queryAgent(input: HeavyInput): Agent {
  return (request) => {
    const { artifact, rows } = seen(request);
    if (artifact === undefined) return { kind: 'turn', toolCalls: [input.fetch] };
    if (rows === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__query_artifact', args: { sql: input.errorsSql(artifact) } }] };
    return { kind: 'turn', text: rowsOf(rows) };
  };
}

/**
 * Maps the input, then adds the chunks' answers up over the map's table: each answer's keys are columns of it
 * (`svc-…`, NULL where an answer lacked the service), so one UNPIVOT turns them into rows to sum, whichever
 * services the first answer named.
 */
export function mapAgent(input: HeavyInput): Agent {
  return (request) => {
    const { strings, artifact, rows } = seen(request);
    const chunk = chunkReply(input, request, strings);
    if (chunk !== undefined) return chunk;
    if (artifact === undefined) return { kind: 'turn', toolCalls: [input.fetch] };
    const mapped = strings.find((text) => text.startsWith(`artifact ${artifact}: `) && text.includes(' answered on each of '));
    if (mapped === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__map_artifact', args: { artifact, instruction: input.instruction } }] };
    const table = /The answers are also table (art_[0-9a-f]{12})/.exec(mapped)?.[1];
    if (table === undefined) return { kind: 'turn', text: 'the map named no table' };
    if (rows === undefined) {
      const sql = `SELECT service, sum(errors) AS errors FROM (UNPIVOT ${table} ON COLUMNS('^svc-') INTO NAME service VALUE errors) GROUP BY service ORDER BY service`;
      return { kind: 'turn', toolCalls: [{ name: 'klym__query_artifact', args: { sql } }] };
    }
    return { kind: 'turn', text: rowsOf(rows) };
  };
}

/** Finds the event of `traceId` with one grep of the records, and says its id and message. */
export function grepAgent(input: HeavyInput, traceId: string): Agent {
  return (request) => {
    const { strings, artifact } = seen(request);
    if (artifact === undefined) return { kind: 'turn', toolCalls: [input.fetch] };
    const found = strings.find((text) => text.startsWith(`artifact ${artifact}: `) && / match(?:es)? of /.test(text));
    if (found === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__grep_artifact', args: { artifact, pattern: traceId } }] };
    const record = /^\d+: (\{.*\})$/m.exec(found)?.[1];
    if (record === undefined) return { kind: 'turn', text: 'not found' };
    const { e } = JSON.parse(record) as { e: { id: string; message: string } };
    return { kind: 'turn', text: `${e.id} carries it: ${e.message}` };
  };
}
