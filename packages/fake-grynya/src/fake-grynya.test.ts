import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
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
    expect(session).toMatchObject({ isError: false, body: { status: 'success', results: expect.arrayContaining([expect.objectContaining({ status: 'success' })]) } });

    const added = await call(client, 'add_node', { node_type: 'Analysis', node_data: { id: 'klym_1', full_text: 'all fine' }, day_id: 'd_2026_11_23', time: '2026-11-23T10:00:00Z' });
    expect(added.body.status).toBe('success');
    expect(grynya.graph.nodes.get('klym_1')).toEqual({ label: 'Analysis', properties: { id: 'klym_1', full_text: 'all fine' } });
    expect(await call(client, 'query_graph', { query: "MATCH (n {id: 'klym_1'})-[r]->(m) RETURN type(r), m.id" })).toEqual({
      isError: false,
      body: { status: 'success', results: [{ 'type(r)': 'HAPPENED_AT', 'm.id': 'd_2026_11_23' }] },
    });

    expect((await call(client, 'link_nodes', { source_id: 's1', target_id: 'klym_1', rel_type: 'PRODUCED' })).body).toMatchObject({ status: 'success', query: expect.any(String) });
    expect((await call(client, 'update_last_event', { session_id: 's1', event_id: 'klym_1' })).body.status).toBe('success');
    expect(grynya.graph.relations.filter((relation) => relation.from === 's1').map((relation) => relation.type).toSorted()).toEqual(['LAST_EVENT', 'PRODUCED', 'STARTED_ON']);

    expect(await call(client, 'add_node', { node_type: 'Analysis', node_data: { full_text: 'no id' } })).toEqual({ isError: false, body: { status: 'error', message: 'Missing node id' } });
    // Graph properties are flat, as in FalkorDB: a map among node_data's values is refused, and nothing is written.
    expect((await call(client, 'add_node', { node_type: 'Analysis', node_data: { id: 'nested', usage: { tokens: 3 } } })).body).toEqual({
      status: 'error',
      message: 'Property values can only be of primitive types or arrays of primitive types (usage)',
    });
    expect(grynya.graph.nodes.has('nested')).toBe(false);
    expect((await call(client, 'query_graph', { query: 'DROP EVERYTHING' })).body).toMatchObject({ status: 'error', message: expect.stringContaining('DROP EVERYTHING') });
    grynya.faults.dbDisconnected = true;
    expect(await call(client, 'query_graph', { query: 'RETURN 1' })).toEqual({ isError: false, body: { status: 'error', message: 'FalkorDB is not connected' } });
    grynya.faults.dbDisconnected = false;
    grynya.faults.error = 'DB disconnected';
    expect((await call(client, 'query_graph', { query: 'RETURN 1' })).body).toEqual({ status: 'error', message: 'DB disconnected' });
    expect(grynya.stats.calls).toMatchObject({ create_session: 1, add_node: 3, query_graph: 4, link_nodes: 1, update_last_event: 1 });
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
    const posted = await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
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
