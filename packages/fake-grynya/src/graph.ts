import { BigGraph } from './big-graph.ts';
import { pythonJsonDumps } from './python-json.ts';

/** A node of the fake graph: one label, as grynya's `add_node` makes them, and its properties (`id` among them). */
export interface GraphNode {
  readonly label: string;
  readonly properties: Record<string, unknown>;
}

/** A relation between two nodes, by their ids. */
export interface GraphRelation {
  readonly type: string;
  readonly from: string;
  readonly to: string;
  readonly properties: Record<string, unknown>;
}

/** A row of a query's result, keyed the way FalkorDB names columns (`count(n)`, `m.id`). */
export type Row = Record<string, unknown>;

/** Raised for a query outside the supported subset; its message goes back as `{"status":"error"}`. */
export class QueryError extends Error {
  override readonly name = 'QueryError';
}

const QUOTED = String.raw`'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"`;
const NODE_BY_ID = String.raw`\(\s*(\w+)\s*(?::\s*(\w+))?\s*\{\s*id\s*:\s*(?:${QUOTED})\s*\}\s*\)`;
/** `MATCH (e:Label) [WHERE e.property = 'value'] RETURN e [LIMIT k]`, answered for the big graph's `Event` label only. */
const NODES_BY_LABEL = new RegExp(String.raw`^MATCH \( ?(\w+) ?: ?(\w+) ?\)(?: WHERE (\w+)\.(\w+) ?= ?(?:${QUOTED}))? RETURN (\w+)(?: LIMIT (\d+))?$`, 'i');

/** One space between words, no trailing `;`: how the patterns below expect a query. */
const normalize = (text: string): string => text.replace(/;\s*$/, '').trim().replace(/\s+/g, ' ');
const unquote = (quoted: string): string => quoted.replace(/\\(.)/g, '$1');

/** A query for the big graph's Event nodes, taken apart. */
interface EventsQuery {
  readonly variable: string;
  readonly filter: { readonly property: string; readonly equals: string } | undefined;
  readonly limit: number | undefined;
}

/**
 * The fake's in-memory graph and the subset of Cypher it answers, case-insensitive:
 *
 * - `RETURN <integer>` → `[{"<integer>": <integer>}]`
 * - `MATCH (n) RETURN count(n)`, `MATCH (n:Label) RETURN count(n)` → `[{"count(n)": N}]`
 * - `MATCH (n:Label {id: 'x'}) RETURN n` (label optional) → `[{"n": {label, properties}}]`, or no rows
 * - `MATCH (n {id: 'x'})-[r]-(m) RETURN type(r), m.id` (also `->`, `<-`, with a label on `n`) → one row per relation
 * - with a big graph loaded ({@link Graph.loadEvents}): `MATCH (e:Event) RETURN e` → one row per event, in order,
 *   exactly `{"e": {id, label, service, severity, day, trace_id, message}}` (see `eventRow`); optionally
 *   `WHERE e.<property> = '<value>'` and `LIMIT <k>`. The counts above count its events too.
 *
 * The big graph's events live beside the graph's own nodes: `MATCH (e:Event) RETURN e` answers them only (not
 * nodes `add_node` labelled `Event`), and `{id: …}` lookups and relations see only the graph's own nodes.
 *
 * Anything else throws a {@link QueryError}, which the tool answers as the real server answers a database error.
 */
export class Graph {
  readonly nodes = new Map<string, GraphNode>();
  readonly relations: GraphRelation[] = [];
  #bigGraph: BigGraph | undefined;

  /** The big graph of Event nodes that {@link Graph.loadEvents} loaded, if any. */
  get bigGraph(): BigGraph | undefined {
    return this.#bigGraph;
  }

  /**
   * Holds a big graph of `events` Event nodes made from `seed` (in place of any before; `0` holds an empty one),
   * and serializes the answer to `MATCH (e:Event) RETURN e` at once (about 0.5 s for 120,000 events), so that the
   * first query is as quick as the next. Loading the same size and seed again keeps what is serialized.
   *
   * @param seed - @default 1
   * @throws {RangeError} for a size outside 0 to 1,000,000 or a seed outside 0 to 2^32 − 1.
   */
  loadEvents(events: number, seed = 1): BigGraph {
    if (this.#bigGraph?.events !== events || this.#bigGraph.seed !== seed) this.#bigGraph = new BigGraph(events, seed);
    this.#bigGraph.serializedRows('e');
    return this.#bigGraph;
  }

  /** Creates the node or updates its properties (Cypher `MERGE … SET`). */
  mergeNode(label: string, properties: Record<string, unknown> & { id: string }): GraphNode {
    const existing = this.nodes.get(properties.id);
    if (existing !== undefined) {
      Object.assign(existing.properties, properties);
      return existing;
    }
    const node = { label, properties: { ...properties } };
    this.nodes.set(properties.id, node);
    return node;
  }

  /** Adds the relation unless one of that type already joins the two nodes; false when a node is missing (`MATCH` found nothing). */
  mergeRelation(type: string, from: string, to: string, properties: Record<string, unknown> = {}): boolean {
    if (!this.nodes.has(from) || !this.nodes.has(to)) return false;
    const existing = this.relations.find((relation) => relation.type === type && relation.from === from && relation.to === to);
    if (existing === undefined) this.relations.push({ type, from, to, properties: { ...properties } });
    else Object.assign(existing.properties, properties);
    return true;
  }

  /** Removes every relation of `type` leaving `from`. */
  deleteRelations(type: string, from: string): void {
    for (let index = this.relations.length - 1; index >= 0; index--) {
      const relation = this.relations[index] as GraphRelation;
      if (relation.type === type && relation.from === from) this.relations.splice(index, 1);
    }
  }

  /** Runs a query of the supported subset. @throws {QueryError} for anything else. */
  query(text: string): Row[] {
    const query = normalize(text);
    let match: RegExpMatchArray | null;

    if ((match = query.match(/^RETURN (-?\d+)$/i))) {
      return [{ [match[1] as string]: Number(match[1]) }];
    }
    if ((match = query.match(/^MATCH \((\w+)(?::(\w+))?\) RETURN count\((\w+)\)$/i)) && match[1] === match[3]) {
      const label = match[2];
      const count = [...this.nodes.values()].filter((node) => label === undefined || node.label === label).length;
      const events = label === undefined || label === 'Event' ? (this.#bigGraph?.events ?? 0) : 0;
      return [{ [`count(${match[1]})`]: count + events }];
    }
    if ((match = query.match(new RegExp(`^MATCH ${NODE_BY_ID} RETURN (\\w+)$`, 'i'))) && match[1] === match[5]) {
      const node = this.#find(match[2], match[3] ?? match[4] ?? '');
      return node === undefined ? [] : [{ [match[1] as string]: { label: node.label, properties: { ...node.properties } } }];
    }
    const relationQuery = new RegExp(`^MATCH ${NODE_BY_ID}\\s*(<?)-\\[(\\w+)\\]-(>?)\\s*\\((\\w+)\\) RETURN type\\((\\w+)\\), ?(\\w+)\\.id$`, 'i');
    if ((match = query.match(relationQuery)) && match[6] === match[9] && match[8] === match[10]) {
      const [, , label, single, double, incoming, , outgoing] = match;
      const id = single ?? double ?? '';
      if (this.#find(label, id) === undefined) return [];
      const other = match[8] as string;
      return this.relations.flatMap((relation) => {
        const rows: Row[] = [];
        if (relation.from === id && incoming === '') rows.push({ [`type(${match?.[6]})`]: relation.type, [`${other}.id`]: relation.to });
        if (relation.to === id && outgoing === '') rows.push({ [`type(${match?.[6]})`]: relation.type, [`${other}.id`]: relation.from });
        return rows;
      });
    }
    const events = this.#eventsQuery(query);
    if (events !== undefined) return (this.#bigGraph as BigGraph).rows(events.variable, events.filter, events.limit);
    throw new QueryError(`The fake graph does not support this query: ${text.slice(0, 200)}`);
  }

  /**
   * The rows of {@link Graph.query} as Python's `json.dumps` writes them, which is how `query_graph` answers them.
   * The answer to the big graph's whole Event set comes from its cache: it is serialized once per variable name.
   * @throws {QueryError} for a query outside the supported subset.
   */
  queryJson(text: string): string {
    const events = this.#eventsQuery(normalize(text));
    if (events !== undefined && events.filter === undefined && events.limit === undefined) return (this.#bigGraph as BigGraph).serializedRows(events.variable);
    return pythonJsonDumps(this.query(text));
  }

  /** The query taken apart when it asks for the big graph's Event nodes and one is loaded; `undefined` otherwise. */
  #eventsQuery(query: string): EventsQuery | undefined {
    const match = query.match(NODES_BY_LABEL);
    if (match === null || this.#bigGraph === undefined || match[2] !== 'Event') return undefined;
    const [, variable, , whereVariable, property, single, double, returned, limit] = match;
    if (returned !== variable || (whereVariable !== undefined && whereVariable !== variable)) return undefined;
    return {
      variable: variable as string,
      filter: property === undefined ? undefined : { property, equals: unquote(single ?? double ?? '') },
      limit: limit === undefined ? undefined : Number(limit),
    };
  }

  #find(label: string | undefined, id: string): GraphNode | undefined {
    const node = this.nodes.get(unquote(id));
    return node !== undefined && (label === undefined || node.label === label) ? node : undefined;
  }
}
