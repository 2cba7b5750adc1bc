/**
 * `@klym/fake-grynya`: an in-memory stand-in for grynya-mcp-server with its exact MCP contract and fault switches.
 * @module
 */
export {
  BigGraph,
  EVENT_SERVICES,
  EVENT_SEVERITIES,
  MAX_EVENTS,
  bigGraphFacts,
  eventRow,
  type BigGraphEvent,
  type BigGraphFacts,
  type EventRow,
  type EventService,
  type EventSeverity,
} from './big-graph.ts';
export { createFakeGrynya, type FakeGrynya, type FakeGrynyaOptions, type FakeGrynyaStats } from './fake-grynya.ts';
export { Graph, QueryError, type GraphNode, type GraphRelation, type Row } from './graph.ts';
export { pythonJsonDumps } from './python-json.ts';
export type { Faults } from './tools.ts';
