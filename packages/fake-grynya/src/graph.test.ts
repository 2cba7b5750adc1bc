import { describe, expect, it } from 'vitest';
import { Graph, QueryError } from './graph.ts';

function sample(): Graph {
  const graph = new Graph();
  graph.mergeNode('Day', { id: 'd_2026_11_23' });
  graph.mergeNode('Analysis', { id: 'a1', full_text: 'found it' });
  graph.mergeNode('Session', { id: 's1' });
  graph.mergeRelation('HAPPENED_AT', 'a1', 'd_2026_11_23', { time: '10:00' });
  graph.mergeRelation('LAST_EVENT', 's1', 'a1');
  return graph;
}

describe('the fake graph’s Cypher subset', () => {
  it('answers RETURN of an integer with the column FalkorDB names', () => {
    expect(new Graph().query('RETURN 1')).toEqual([{ '1': 1 }]);
    expect(new Graph().query('  return 42 ; ')).toEqual([{ '42': 42 }]);
  });

  it('counts all nodes, or the nodes of one label', () => {
    const graph = sample();
    expect(graph.query('MATCH (n) RETURN count(n)')).toEqual([{ 'count(n)': 3 }]);
    expect(graph.query('MATCH (x:Analysis) RETURN count(x)')).toEqual([{ 'count(x)': 1 }]);
  });

  it('matches a node by id, with or without its label, and finds nothing under another label', () => {
    const graph = sample();
    expect(graph.query("MATCH (n:Analysis {id: 'a1'}) RETURN n")).toEqual([{ n: { label: 'Analysis', properties: { id: 'a1', full_text: 'found it' } } }]);
    expect(graph.query('MATCH (n {id: "a1"}) RETURN n')).toHaveLength(1);
    expect(graph.query("MATCH (n:Day {id: 'a1'}) RETURN n")).toEqual([]);
  });

  it("lists a node's relations in either direction, or one direction", () => {
    const graph = sample();
    expect(graph.query("MATCH (n {id: 'a1'})-[r]-(m) RETURN type(r), m.id")).toEqual([
      { 'type(r)': 'HAPPENED_AT', 'm.id': 'd_2026_11_23' },
      { 'type(r)': 'LAST_EVENT', 'm.id': 's1' },
    ]);
    expect(graph.query("MATCH (n {id: 'a1'})-[r]->(m) RETURN type(r), m.id")).toEqual([{ 'type(r)': 'HAPPENED_AT', 'm.id': 'd_2026_11_23' }]);
    expect(graph.query("MATCH (n {id: 'a1'})<-[r]-(m) RETURN type(r), m.id")).toEqual([{ 'type(r)': 'LAST_EVENT', 'm.id': 's1' }]);
  });

  it('merges instead of duplicating, and links only nodes that exist', () => {
    const graph = sample();
    graph.mergeNode('Analysis', { id: 'a1', extra: true });
    expect(graph.nodes.get('a1')?.properties).toEqual({ id: 'a1', full_text: 'found it', extra: true });
    expect(graph.mergeRelation('HAPPENED_AT', 'a1', 'd_2026_11_23')).toBe(true);
    expect(graph.relations.filter((relation) => relation.type === 'HAPPENED_AT')).toHaveLength(1);
    expect(graph.mergeRelation('MENTIONS', 'a1', 'nowhere')).toBe(false);
  });

  it('refuses anything outside the subset with an error naming the query', () => {
    expect(() => new Graph().query('MATCH (n) DETACH DELETE n')).toThrow(QueryError);
    expect(() => new Graph().query('MATCH (n) DETACH DELETE n')).toThrow(/does not support this query: MATCH \(n\) DETACH DELETE n/);
  });
});
