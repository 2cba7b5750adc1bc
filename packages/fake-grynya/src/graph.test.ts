import { describe, expect, it } from 'vitest';
import { eventRow } from './big-graph.ts';
import { Graph, QueryError } from './graph.ts';
import { pythonJsonDumps } from './python-json.ts';

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

describe('the fake graph’s big graph of Event nodes', () => {
  it('answers MATCH (e:Event) RETURN e with every event in order, in any case and spacing of the keywords', () => {
    const graph = new Graph();
    graph.loadEvents(300, 4);
    const expected = Array.from({ length: 300 }, (_, index) => eventRow(index, 4));
    expect(graph.query('MATCH (e:Event) RETURN e')).toEqual(expected);
    expect(graph.query('  match ( e : Event )\n   return e ;')).toEqual(expected);
    // Another variable names the column, as FalkorDB does.
    expect(graph.query('MATCH (x:Event) RETURN x')[0]).toEqual({ x: eventRow(0, 4).e });
  });

  it('filters with WHERE e.<property> = value and stops at LIMIT', () => {
    const graph = new Graph();
    graph.loadEvents(300, 4);
    const all = Array.from({ length: 300 }, (_, index) => eventRow(index, 4));
    const billing = all.filter(({ e }) => e.service === 'svc-billing');
    expect(billing.length).toBeGreaterThan(0);
    expect(graph.query("MATCH (e:Event) WHERE e.service = 'svc-billing' RETURN e")).toEqual(billing);
    expect(graph.query('MATCH (e:Event) WHERE e.severity="error" RETURN e LIMIT 2')).toEqual(all.filter(({ e }) => e.severity === 'error').slice(0, 2));
    expect(graph.query('MATCH (e:Event) RETURN e LIMIT 3')).toEqual(all.slice(0, 3));
    expect(graph.query('MATCH (e:Event) RETURN e LIMIT 0')).toEqual([]);
    expect(graph.query("MATCH (e:Event) WHERE e.service = 'svc-nowhere' RETURN e")).toEqual([]);
  });

  it('counts its events with the graph’s own nodes', () => {
    const graph = sample();
    graph.loadEvents(250);
    expect(graph.query('MATCH (n) RETURN count(n)')).toEqual([{ 'count(n)': 253 }]);
    expect(graph.query('MATCH (n:Event) RETURN count(n)')).toEqual([{ 'count(n)': 250 }]);
    expect(graph.query('MATCH (n:Analysis) RETURN count(n)')).toEqual([{ 'count(n)': 1 }]);
  });

  it('serializes as pythonJsonDumps does, the whole set from a cache kept while the size and seed stay', () => {
    const graph = new Graph();
    const loaded = graph.loadEvents(400, 2);
    for (const query of [
      'MATCH (e:Event) RETURN e',
      'MATCH (x:Event) RETURN x',
      "MATCH (e:Event) WHERE e.day = '2026-10-05' RETURN e",
      'MATCH (e:Event) RETURN e LIMIT 5',
      'RETURN 1',
    ]) {
      expect(graph.queryJson(query)).toBe(pythonJsonDumps(graph.query(query)));
    }
    expect(graph.loadEvents(400, 2)).toBe(loaded);
    expect(graph.loadEvents(400, 3)).not.toBe(loaded);
    expect(graph.bigGraph).toMatchObject({ events: 400, seed: 3 });
    expect(graph.loadEvents(0).rows('e')).toEqual([]);
    expect(graph.queryJson('MATCH (e:Event) RETURN e')).toBe('[]');
  });

  it('leaves the Event query unsupported without a big graph, and refuses other labels and mismatched variables', () => {
    expect(() => new Graph().query('MATCH (e:Event) RETURN e')).toThrow(QueryError);
    const graph = new Graph();
    graph.loadEvents(10);
    for (const query of [
      'MATCH (e:Session) RETURN e',
      'MATCH (e:event) RETURN e',
      'MATCH (e:Event) RETURN x',
      "MATCH (e:Event) WHERE x.service = 'a' RETURN e",
    ]) {
      expect(() => graph.query(query)).toThrow(QueryError);
    }
    expect(() => graph.loadEvents(-5)).toThrow(RangeError);
  });
});
