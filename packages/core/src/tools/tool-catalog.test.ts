import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createToolCatalog } from './tool-catalog.ts';

function server(tools: Record<string, { readOnly?: boolean; args?: boolean }>): () => McpServer {
  return () => {
    const mcp = new McpServer({ name: 'test', version: '1.0.0' });
    for (const [name, options] of Object.entries(tools)) {
      mcp.registerTool(
        name,
        {
          description: `The ${name} tool`,
          inputSchema: options.args ? { text: z.string() } : {},
          ...(options.readOnly ? { annotations: { readOnlyHint: true } } : {}),
        },
        () => ({ content: [{ type: 'text' as const, text: `${name} ran` }], structuredContent: { tool: name } }),
      );
    }
    return mcp;
  };
}

const pools: SessionPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

async function poolOf(upstreams: Record<string, Record<string, { readOnly?: boolean; args?: boolean }>>): Promise<SessionPool> {
  const pool = await createSessionPool({
    upstreams: Object.fromEntries(Object.entries(upstreams).map(([name, tools]) => [name, createInMemoryUpstream(server(tools))])),
  });
  pools.push(pool);
  return pool;
}

describe('createToolCatalog', () => {
  it('marks each tool read-only or not and allowed or not, and resolves a probe per upstream', async () => {
    const pool = await poolOf({
      docs: { search: { readOnly: true, args: true }, stats: { readOnly: true }, write: {} },
      graph: { query_graph: { args: true }, add_node: {} },
      tools: { mutate: {} },
      picked: { ping_db: { args: true } },
    });

    const catalog = await createToolCatalog({
      pool,
      selection: { policy: 'read-only' },
      upstreams: { picked: { probe: { tool: 'ping_db', args: { text: 'hi' } }, readOnlyTools: ['ping_*'] } },
    });

    expect(catalog.allowed.map((tool) => tool.name)).toEqual(['docs__search', 'docs__stats', 'picked__ping_db']);
    expect(catalog.tools.find((tool) => tool.name === 'docs__write')).toMatchObject({
      readOnly: false,
      access: { allowed: false, policy: 'policy "read-only"' },
    });
    expect(catalog.upstreams).toEqual({
      docs: { ok: true, toolCount: 3 },
      graph: { ok: true, toolCount: 2 },
      tools: { ok: true, toolCount: 1 },
      picked: { ok: true, toolCount: 1 },
    });
    expect(catalog.probes).toEqual({
      docs: { ok: true, toolName: 'docs__stats', args: {} },
      graph: { ok: false, reason: expect.stringContaining('its probe graph__query_graph is denied by policy "read-only"') },
      tools: { ok: false, reason: 'it has no read-only tool that needs no arguments; configure a probe' },
      picked: { ok: true, toolName: 'picked__ping_db', args: { text: 'hi' } },
    });
    const open = await createToolCatalog({ pool });
    expect(open.probes.graph).toEqual({ ok: true, toolName: 'graph__query_graph', args: { query: 'RETURN 1' } });
  });

  it('its tools call through the pool and keep structuredContent; a denied tool refuses, naming the policy', async () => {
    const pool = await poolOf({ docs: { search: { readOnly: true, args: true }, write: {} } });
    const catalog = await createToolCatalog({ pool, selection: { deny: ['*__write'] } });
    const tools = catalog.toolSet();
    const options = { toolCallId: 'c1', messages: [], context: {} };

    const result = await tools.docs__search?.execute?.({ text: 'x' }, options);
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'search ran' }], structuredContent: { tool: 'search' } });
    const output = await tools.docs__search?.toModelOutput?.({ toolCallId: 'c1', input: { text: 'x' }, output: result });
    expect(output).toEqual({ type: 'text', value: 'search ran\nstructuredContent: {"tool":"search"}' });

    await expect(Promise.resolve(tools.docs__write?.execute?.({}, options))).rejects.toMatchObject({
      code: 'TOOL_DENIED',
      message: 'Tool docs__write is denied by run deny list: "docs__write" matches the deny pattern "*__write"',
    });
    expect(pool.status().docs?.calls.started).toBe(1);
  });
});
