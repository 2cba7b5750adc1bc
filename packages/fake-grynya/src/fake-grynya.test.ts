import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { bigGraphFacts, eventRow } from './big-graph.ts';
import { createFakeGrynya, type FakeGrynya } from './fake-grynya.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

async function fake(options: Parameters<typeof createFakeGrynya>[0] = {}): Promise<FakeGrynya> {
  const grynya = await createFakeGrynya(options);
  cleanups.push(() => grynya.close());
  return grynya;
}

async function connect(grynya: FakeGrynya, kind: 'sse' | 'streamable-http'): Promise<Client> {
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(kind === 'sse' ? new SSEClientTransport(new URL(grynya.sseUrl)) : new StreamableHTTPClientTransport(new URL(grynya.mcpUrl)));
  cleanups.push(() => client.close());
  return client;
}

/** The one text item a tool answers, as it came. */
async function textOf(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = await client.callTool({ name, arguments: args });
  const content = result.content as { type: string; text: string }[];
  expect(content).toHaveLength(1);
  expect(result.isError).toBeUndefined();
  return content[0]?.text ?? '';
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; body: Record<string, unknown> }> {
  const result = await client.callTool({ name, arguments: args });
  const content = result.content as { type: string; text: string }[];
  expect(content).toHaveLength(1);
  return { isError: result.isError === true, body: JSON.parse(content[0]?.text ?? '') as Record<string, unknown> };
}

describe('the fake grynya-mcp-server', () => {
  for (const kind of ['sse', 'streamable-http'] as const) {
    it(`over ${kind}: introduces itself as grynya-falkordb-mcp and serves the five tools with the contract's schemas`, async () => {
      const client = await connect(await fake(), kind);
      expect(client.getServerVersion()?.name).toBe('grynya-falkordb-mcp');
      const { tools } = await client.listTools();
      const schemas = Object.fromEntries(tools.map((tool) => [tool.name, tool.inputSchema]));
      expect(Object.keys(schemas).toSorted()).toEqual(['add_node', 'create_session', 'link_nodes', 'query_graph', 'update_last_event']);
      expect(schemas.query_graph?.required).toEqual(['query']);
      expect(schemas.create_session?.required?.toSorted()).toEqual(['date', 'name', 'session_id', 'topic', 'trigger', 'year']);
      expect(schemas.add_node?.required?.toSorted()).toEqual(['node_data', 'node_type']);
      expect(schemas.link_nodes?.required?.toSorted()).toEqual(['rel_type', 'source_id', 'target_id']);
      expect(tools.every((tool) => tool.annotations === undefined)).toBe(true);
    });
  }

  it('writes what the tools say, answering JSON with a status and never isError, failures included', async () => {
    const grynya = await fake();
    const client = await connect(grynya, 'sse');
    const session = await call(client, 'create_session', { session_id: 's1', name: 'n', topic: 't', trigger: 'x', date: '2026-11-23', year: 2026 });
    expect(session).toMatchObject({
      isError: false,
      body: { status: 'success', results: expect.arrayContaining([expect.objectContaining({ status: 'success' })]) },
    });

    const added = await call(client, 'add_node', {
      node_type: 'Analysis',
      node_data: { id: 'klym_1', full_text: 'all fine' },
      day_id: 'd_2026_11_23',
      time: '2026-11-23T10:00:00Z',
    });
    expect(added.body.status).toBe('success');
    expect(grynya.graph.nodes.get('klym_1')).toEqual({ label: 'Analysis', properties: { id: 'klym_1', full_text: 'all fine' } });
    expect(await call(client, 'query_graph', { query: "MATCH (n {id: 'klym_1'})-[r]->(m) RETURN type(r), m.id" })).toEqual({
      isError: false,
      body: { status: 'success', results: [{ 'type(r)': 'HAPPENED_AT', 'm.id': 'd_2026_11_23' }] },
    });

    expect((await call(client, 'link_nodes', { source_id: 's1', target_id: 'klym_1', rel_type: 'PRODUCED' })).body).toMatchObject({
      status: 'success',
      query: expect.any(String),
    });
    expect((await call(client, 'update_last_event', { session_id: 's1', event_id: 'klym_1' })).body.status).toBe('success');
    expect(
      grynya.graph.relations
        .filter((relation) => relation.from === 's1')
        .map((relation) => relation.type)
        .toSorted(),
    ).toEqual(['LAST_EVENT', 'PRODUCED', 'STARTED_ON']);

    expect(await call(client, 'add_node', { node_type: 'Analysis', node_data: { full_text: 'no id' } })).toEqual({
      isError: false,
      body: { status: 'error', message: 'Missing node id' },
    });
    // Graph properties are flat, as in FalkorDB: a map among node_data's values is refused, and nothing is written.
    expect((await call(client, 'add_node', { node_type: 'Analysis', node_data: { id: 'nested', usage: { tokens: 3 } } })).body).toEqual({
      status: 'error',
      message: 'Property values can only be of primitive types or arrays of primitive types (usage)',
    });
    expect(grynya.graph.nodes.has('nested')).toBe(false);
    expect((await call(client, 'query_graph', { query: 'DROP EVERYTHING' })).body).toMatchObject({
      status: 'error',
      message: expect.stringContaining('DROP EVERYTHING'),
    });
    grynya.faults.dbDisconnected = true;
    expect(await call(client, 'query_graph', { query: 'RETURN 1' })).toEqual({
      isError: false,
      body: { status: 'error', message: 'FalkorDB is not connected' },
    });
    grynya.faults.dbDisconnected = false;
    grynya.faults.error = 'DB disconnected';
    expect((await call(client, 'query_graph', { query: 'RETURN 1' })).body).toEqual({ status: 'error', message: 'DB disconnected' });
    expect(grynya.stats.calls).toMatchObject({ create_session: 1, add_node: 3, query_graph: 4, link_nodes: 1, update_last_event: 1 });
  });

  it('writes every answer as Python’s json.dumps does: ", " and ": ", non-ASCII escaped, one line', async () => {
    const grynya = await fake();
    const client = await connect(grynya, 'sse');
    expect(await textOf(client, 'query_graph', { query: 'RETURN 1' })).toBe('{"status": "success", "results": [{"1": 1}]}');
    expect(await textOf(client, 'add_node', { node_type: 'Note', node_data: { id: 'zoë', text: 'Київ 🚀', n: 2 } })).toBe(
      String.raw`{"status": "success", "results": [{"query": "MERGE (n:Note {id: 'zo\u00eb'}) SET n += $props", "status": "success"}]}`,
    );
    expect(await textOf(client, 'query_graph', { query: "MATCH (n {id: 'zoë'}) RETURN n" })).toBe(
      String.raw`{"status": "success", "results": [{"n": {"label": "Note", "properties": {"id": "zo\u00eb", "text": "\u041a\u0438\u0457\u0432 \ud83d\ude80", "n": 2}}}]}`,
    );
    expect(await textOf(client, 'link_nodes', { source_id: 'zoë', target_id: 'zoë', rel_type: 'SELF' })).toBe(
      String.raw`{"status": "success", "query": "MATCH (a {id: 'zo\u00eb'}), (b {id: 'zo\u00eb'}) MERGE (a)-[:SELF]->(b)"}`,
    );
    grynya.faults.dbDisconnected = true;
    expect(await textOf(client, 'query_graph', { query: 'RETURN 1' })).toBe('{"status": "error", "message": "FalkorDB is not connected"}');
  });

  it('holds a big graph from its options or loaded at run time, and answers its Event rows on one line', async () => {
    const grynya = await fake({ bigGraph: { events: 400, seed: 3 } });
    const client = await connect(grynya, 'streamable-http');
    const text = await textOf(client, 'query_graph', { query: 'MATCH (e:Event) RETURN e' });
    expect(text).not.toContain('\n');
    expect(text.startsWith('{"status": "success", "results": [{"e": {"id": "ev-000000", "label": "Event", "service": ')).toBe(true);
    expect(JSON.parse(text)).toEqual({ status: 'success', results: Array.from({ length: 400 }, (_, index) => eventRow(index, 3)) });

    const facts = bigGraphFacts(400, 3);
    const billing = JSON.parse(await textOf(client, 'query_graph', { query: "MATCH (e:Event) WHERE e.service = 'svc-billing' RETURN e" })) as {
      results: unknown[];
    };
    expect(billing.results).toHaveLength(Object.values(facts.countsByService['svc-billing']).reduce((sum, count) => sum + count, 0));

    expect(grynya.loadEvents(25, 8)).toMatchObject({ events: 25, seed: 8 });
    expect(JSON.parse(await textOf(client, 'query_graph', { query: 'MATCH (e:Event) RETURN e LIMIT 30' }))).toEqual({
      status: 'success',
      results: Array.from({ length: 25 }, (_, index) => eventRow(index, 8)),
    });
    expect(grynya.graph.bigGraph).toMatchObject({ events: 25, seed: 8 });
  });

  it('refuses a big graph out of range before it listens, naming the option', async () => {
    await expect(createFakeGrynya({ bigGraph: { events: -1 } })).rejects.toThrow(
      new RangeError('Expected `bigGraph.events` to be an integer from 0 to 1000000, got -1'),
    );
    await expect(createFakeGrynya({ bigGraph: { events: 10, seed: 0.5 } })).rejects.toThrow(
      new RangeError('Expected `bigGraph.seed` to be an integer from 0 to 4294967295, got 0.5'),
    );
  });

  it('answers 421 to a Host outside its allow-list, and /health with the database state', async () => {
    const grynya = await fake({ allowedHosts: ['localhost'] });
    const refused = await fetch(grynya.healthUrl);
    expect(refused.status).toBe(421);
    // (undici's fetch retries a 421 once by itself.)
    expect(grynya.stats.rejectedHost).toBeGreaterThanOrEqual(1);

    const open = await fake();
    expect(await (await fetch(open.healthUrl)).json()).toEqual({ status: 'ok', falkordb_connected: true });
    open.faults.dbDisconnected = true;
    expect(await (await fetch(open.healthUrl)).json()).toEqual({ status: 'ok', falkordb_connected: false });
  });

  it('refuses requests on an SSE session that never completed initialize, as the Python SDK does', async () => {
    const grynya = await fake();
    const stream = await fetch(grynya.sseUrl, { headers: { accept: 'text/event-stream' } });
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let events = '';
    while (!/data: (\S+)/.test(events)) events += new TextDecoder().decode((await reader.read()).value);
    const endpoint = new URL((events.match(/data: (\S+)/) as RegExpMatchArray)[1] as string, grynya.sseUrl);
    const posted = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(posted.status).toBe(202);
    while (!events.includes('before initialization')) events += new TextDecoder().decode((await reader.read()).value);
    expect(events).toContain('"code":-32600');
    expect(grynya.stats.refusedBeforeInitialize).toBe(1);
    await reader.cancel();
  });

  it('dies like a killed process and comes back on the same port with its graph but no sessions', async () => {
    const grynya = await fake();
    const client = await connect(grynya, 'streamable-http');
    await call(client, 'add_node', { node_type: 'Note', node_data: { id: 'kept' } });
    await grynya.die();
    await expect(fetch(grynya.healthUrl)).rejects.toThrow('fetch failed');
    await grynya.restart();
    expect((await fetch(grynya.healthUrl)).status).toBe(200);
    // The old session is forgotten: a restarted Streamable HTTP server answers 404.
    await expect(client.listTools()).rejects.toThrow(/404|Session not found/);
    const fresh = await connect(grynya, 'streamable-http');
    expect((await call(fresh, 'query_graph', { query: 'MATCH (n) RETURN count(n)' })).body).toEqual({ status: 'success', results: [{ 'count(n)': 1 }] });
    expect(grynya.stats.initialize).toBe(2);
  });
});
