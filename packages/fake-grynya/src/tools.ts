import { McpServer, type CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { QueryError, type Graph } from './graph.ts';
import { pythonJsonDumps } from './python-json.ts';

/** Switches that make the fake misbehave, each on its own; flip them at any time. */
export interface Faults {
  /** Every tool call waits this long before answering. */
  delayMs: number;
  /** Every tool call hangs until it is cancelled or the server dies. */
  hang: boolean;
  /** Every tool call answers `{"status": "error", "message": "FalkorDB is not connected"}`, and `/health` says so. */
  dbDisconnected: boolean;
  /** Every tool call answers `{"status": "error", "message": <this>}`. */
  error: string | undefined;
}

/** What one server instance needs to serve the tools. */
export interface ToolContext {
  readonly graph: Graph;
  readonly faults: Faults;
  /** Counts a tool call by tool name. */
  countCall(tool: string): void;
  /** Aborts when the server dies: hanging calls end without an answer. */
  readonly dying: AbortSignal;
}

/** One text item, serialized as the real server's `json.dumps` does; a string is an answer serialized already. */
const answer = (value: unknown): CallToolResult => ({ content: [{ type: 'text', text: typeof value === 'string' ? value : pythonJsonDumps(value) }] });
const statement = (query: string) => ({ query, status: 'success' });
const cypherString = (value: string): string => `'${value.replace(/'/g, "\\'")}'`;
/** FastMCP derives `x: str = None` as an optional, nullable string defaulting to null. */
const optionalString = () => z.string().nullable().default(null);
const isPrimitive = (value: unknown): boolean => value === null || ['string', 'number', 'boolean'].includes(typeof value);
/** What a graph property may hold: a primitive, or an array of primitives. */
const isPropertyValue = (value: unknown): boolean => isPrimitive(value) || (Array.isArray(value) && value.every(isPrimitive));

/**
 * An MCP server with grynya-mcp-server's five tools, names and argument shapes as FastMCP derives them
 * from the Python signatures. Like the real one, every answer is one text item holding JSON with a
 * `status`, never `isError`, even on failure, written as Python's `json.dumps` writes it (one line,
 * `", "` and `": "`, non-ASCII as `\uXXXX`).
 */
export function createGrynyaServer(context: ToolContext): McpServer {
  const server = new McpServer({ name: 'grynya-falkordb-mcp', version: '1.0.0' }, { capabilities: { logging: {} } });

  /**
   * Runs a tool under the fault switches; a database failure becomes `{"status": "error"}` as the real one answers.
   * `work` gives the answer's value, or its JSON text when that is serialized already (the big graph's, cached).
   */
  const serve =
    (tool: string, work: () => unknown) =>
    async (_args: unknown, ctx: { mcpReq: { signal: AbortSignal } }): Promise<CallToolResult> => {
      context.countCall(tool);
      const stop = AbortSignal.any([ctx.mcpReq.signal, context.dying]);
      if (context.faults.hang) await new Promise((resolve) => stop.addEventListener('abort', resolve, { once: true }));
      if (context.faults.delayMs > 0) await abortableDelay(context.faults.delayMs, stop);
      // A cancelled call does no work; the SDK sends no answer for it anyway.
      if (stop.aborted) return answer({ status: 'error', message: 'cancelled' });
      if (context.faults.dbDisconnected) return answer({ status: 'error', message: 'FalkorDB is not connected' });
      if (context.faults.error !== undefined) return answer({ status: 'error', message: context.faults.error });
      try {
        return answer(work());
      } catch (error) {
        if (error instanceof QueryError) return answer({ status: 'error', message: error.message });
        throw error;
      }
    };
  const { graph } = context;

  server.registerTool(
    'query_graph',
    { description: 'Run a Cypher query against the knowledge graph and return the rows.', inputSchema: { query: z.string() } },
    (args, extra) =>
      // pythonJsonDumps({ status: 'success', results }), with the rows serialized (or cached) by the graph.
      serve('query_graph', () => `{"status": "success", "results": ${graph.queryJson(args.query)}}`)(args, extra),
  );

  server.registerTool(
    'create_session',
    {
      description: 'Open a Session node and merge its Year and Day nodes.',
      inputSchema: { session_id: z.string(), name: z.string(), topic: z.string(), trigger: z.string(), date: z.string(), year: z.number().int() },
    },
    (args, extra) =>
      serve('create_session', () => {
        const dayId = `d_${args.date.replace(/-/g, '_')}`;
        graph.mergeNode('Year', { id: `y_${args.year}`, value: args.year });
        graph.mergeNode('Day', { id: dayId, date: args.date });
        graph.mergeRelation('PART_OF', dayId, `y_${args.year}`);
        graph.mergeNode('Session', { id: args.session_id, name: args.name, topic: args.topic, trigger: args.trigger, date: args.date });
        graph.mergeRelation('STARTED_ON', args.session_id, dayId);
        return {
          status: 'success',
          results: [
            statement(`MERGE (y:Year {id: 'y_${args.year}'})`),
            statement(`MERGE (d:Day {id: '${dayId}'})-[:PART_OF]->(y)`),
            statement(`MERGE (s:Session {id: ${cypherString(args.session_id)}})-[:STARTED_ON]->(d)`),
          ],
        };
      })(args, extra),
  );

  server.registerTool(
    'add_node',
    {
      description: 'Merge a node with its properties, link it to a Day when day_id and time are given, and add its relations.',
      inputSchema: {
        node_type: z.string(),
        node_data: z.record(z.string(), z.unknown()),
        day_id: optionalString(),
        time: optionalString(),
        relations: z.array(z.object({ type: z.string(), target_id: z.string(), props: z.record(z.string(), z.unknown()).nullable().optional() })).default([]),
      },
    },
    (args, extra) =>
      serve('add_node', () => {
        const id = args.node_data.id;
        if (typeof id !== 'string' || id === '') return { status: 'error', message: 'Missing node id' };
        // FalkorDB refuses `SET n += $props` with a map or an array of maps among the values, as the real server then reports.
        const nested = Object.entries(args.node_data).find(([, value]) => !isPropertyValue(value));
        if (nested !== undefined)
          return { status: 'error', message: `Property values can only be of primitive types or arrays of primitive types (${nested[0]})` };
        graph.mergeNode(args.node_type, { ...args.node_data, id });
        const results = [statement(`MERGE (n:${args.node_type} {id: ${cypherString(id)}}) SET n += $props`)];
        if (args.day_id !== null && args.time !== null) {
          graph.mergeNode('Day', { id: args.day_id });
          graph.mergeRelation('HAPPENED_AT', id, args.day_id, { time: args.time });
          results.push(
            statement(`MATCH (n {id: ${cypherString(id)}}) MERGE (d:Day {id: ${cypherString(args.day_id)}}) MERGE (n)-[:HAPPENED_AT {time: $time}]->(d)`),
          );
        }
        for (const relation of args.relations) {
          graph.mergeRelation(relation.type, id, relation.target_id, relation.props ?? {});
          results.push(statement(`MATCH (a {id: ${cypherString(id)}}), (b {id: ${cypherString(relation.target_id)}}) MERGE (a)-[:${relation.type}]->(b)`));
        }
        return { status: 'success', results };
      })(args, extra),
  );

  server.registerTool(
    'link_nodes',
    {
      description: 'Merge a relation between two nodes.',
      inputSchema: { source_id: z.string(), target_id: z.string(), rel_type: z.string(), props: z.record(z.string(), z.unknown()).nullable().default(null) },
    },
    (args, extra) =>
      serve('link_nodes', () => {
        graph.mergeRelation(args.rel_type, args.source_id, args.target_id, args.props ?? {});
        return {
          status: 'success',
          query: `MATCH (a {id: ${cypherString(args.source_id)}}), (b {id: ${cypherString(args.target_id)}}) MERGE (a)-[:${args.rel_type}]->(b)`,
        };
      })(args, extra),
  );

  server.registerTool(
    'update_last_event',
    { description: "Move a Session's LAST_EVENT pointer to an event.", inputSchema: { session_id: z.string(), event_id: z.string() } },
    (args, extra) =>
      serve('update_last_event', () => {
        graph.deleteRelations('LAST_EVENT', args.session_id);
        graph.mergeRelation('LAST_EVENT', args.session_id, args.event_id);
        return {
          status: 'success',
          results: [
            statement(`MATCH (s:Session {id: ${cypherString(args.session_id)}})-[r:LAST_EVENT]->() DELETE r`),
            statement(`MATCH (s:Session {id: ${cypherString(args.session_id)}}), (e {id: ${cypherString(args.event_id)}}) MERGE (s)-[:LAST_EVENT]->(e)`),
          ],
        };
      })(args, extra),
  );

  return server;
}

function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
