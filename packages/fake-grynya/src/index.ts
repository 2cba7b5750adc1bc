/**
 * `@klym/fake-grynya`: an in-memory stand-in for grynya-mcp-server with its exact MCP contract and fault switches.
 * @module
 */
export { createFakeGrynya, type FakeGrynya, type FakeGrynyaOptions, type FakeGrynyaStats } from './fake-grynya.ts';
export { Graph, QueryError, type GraphNode, type GraphRelation, type Row } from './graph.ts';
export type { Faults } from './tools.ts';
