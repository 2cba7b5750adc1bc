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

/**
 * The fake's in-memory graph and the subset of Cypher it answers, case-insensitive:
 *
 * - `RETURN <integer>` → `[{"<integer>": <integer>}]`
 * - `MATCH (n) RETURN count(n)`, `MATCH (n:Label) RETURN count(n)` → `[{"count(n)": N}]`
 * - `MATCH (n:Label {id: 'x'}) RETURN n` (label optional) → `[{"n": {label, properties}}]`, or no rows
 * - `MATCH (n {id: 'x'})-[r]-(m) RETURN type(r), m.id` (also `->`, `<-`, with a label on `n`) → one row per relation
 *
 * Anything else throws a {@link QueryError}, which the tool answers as the real server answers a database error.
 */
export class Graph {
  readonly nodes = new Map<string, GraphNode>();
  readonly relations: GraphRelation[] = [];

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
    const query = text.replace(/;\s*$/, '').trim().replace(/\s+/g, ' ');
    let match: RegExpMatchArray | null;

    if ((match = query.match(/^RETURN (-?\d+)$/i))) {
      return [{ [match[1] as string]: Number(match[1]) }];
    }
    if ((match = query.match(/^MATCH \((\w+)(?::(\w+))?\) RETURN count\((\w+)\)$/i)) && match[1] === match[3]) {
      const label = match[2];
      const count = [...this.nodes.values()].filter((node) => label === undefined || node.label === label).length;
      return [{ [`count(${match[1]})`]: count }];
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
    throw new QueryError(`The fake graph does not support this query: ${text.slice(0, 200)}`);
  }

  #find(label: string | undefined, id: string): GraphNode | undefined {
    const node = this.nodes.get(id.replace(/\\(.)/g, '$1'));
    return node !== undefined && (label === undefined || node.label === label) ? node : undefined;
  }
}
