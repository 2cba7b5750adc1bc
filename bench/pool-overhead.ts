// Scenario 1 (issue #2): what the pool adds to a call. A pooled `callTool` through @klym/core against
// the raw SDK `Client.callTool` (the v2 client the pool is built on) on a session that is already open:
// same upstream process, same tool, per transport and protocol era, measured side by side in one run.
import { createSessionPool, type UpstreamConfig } from '@klym/core';
import { Client, SSEClientTransport, StreamableHTTPClientTransport, type ClientOptions, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { serverEverythingStdio, startFakeGrynyaProcess, startModernUpstreamProcess } from './servers.ts';
import { figure, ms, ratio, sideBySide } from './stats.ts';

interface Case {
  readonly transport: string;
  readonly upstream: UpstreamConfig;
  readonly rawTransport: () => Transport;
  readonly tool: string;
  readonly args: Record<string, unknown>;
  /** How the raw client settles the era: as the pool does for the upstream. @default the SDK's, `initialize` */
  readonly rawOptions?: ClientOptions;
}

export async function poolOverhead(options: { rounds: number; perRound: number }): Promise<string[]> {
  const grynya = await startFakeGrynyaProcess();
  const modern = await startModernUpstreamProcess();
  const stdio = serverEverythingStdio();
  const cases: Case[] = [
    { transport: 'legacy SSE', upstream: { url: grynya.sseUrl, transport: 'sse' }, rawTransport: () => new SSEClientTransport(new URL(grynya.sseUrl)), tool: 'query_graph', args: { query: 'RETURN 1' } },
    {
      transport: 'Streamable HTTP',
      upstream: { url: grynya.mcpUrl, transport: 'streamable-http' },
      rawTransport: () => new StreamableHTTPClientTransport(new URL(grynya.mcpUrl)),
      tool: 'query_graph',
      args: { query: 'RETURN 1' },
    },
    { transport: 'stdio', upstream: { ...stdio, pool: { max: 1 } }, rawTransport: () => new StdioClientTransport({ ...stdio, stderr: 'ignore' }), tool: 'echo', args: { message: 'hi' } },
    {
      transport: 'Streamable HTTP, 2026-07-28',
      upstream: { url: modern.url },
      rawTransport: () => new StreamableHTTPClientTransport(new URL(modern.url)),
      rawOptions: { versionNegotiation: { mode: 'auto' } },
      tool: 'echo',
      args: { message: 'hi' },
    },
  ];
  const rows = [
    '| transport | pooled median | pooled p99 | raw SDK median | raw SDK p99 | ratio of medians | ratio of p99s |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  const figures: string[] = [];
  const key = { 'legacy SSE': 'sse', 'Streamable HTTP': 'streamable_http', stdio: 'stdio', 'Streamable HTTP, 2026-07-28': 'stateless_2026' } as Record<string, string>;
  try {
    for (const benchCase of cases) {
      await using pool = await createSessionPool({ upstreams: { up: { ...benchCase.upstream, pool: { min: 1, max: 1 } } } });
      await pool.warmedUp();
      const client = new Client({ name: 'bench-raw', version: '1.0.0' }, benchCase.rawOptions);
      await client.connect(benchCase.rawTransport());
      try {
        const pooled = () => pool.callTool('up', benchCase.tool, benchCase.args);
        const raw = () => client.callTool({ name: benchCase.tool, arguments: benchCase.args });
        await sideBySide(2, 100, { a: pooled, b: raw }); // warm-up: JIT, sockets, caches
        const { a, b } = await sideBySide(options.rounds, options.perRound, { a: pooled, b: raw });
        rows.push(`| ${benchCase.transport} | ${ms(a.median)} | ${ms(a.p99)} | ${ms(b.median)} | ${ms(b.p99)} | ${ratio(a.median / b.median)} | ${ratio(a.p99 / b.p99)} |`);
        figures.push(figure(`pooled_ratio_${key[benchCase.transport] ?? benchCase.transport}`, a.median / b.median));
      } finally {
        await client.close();
      }
    }
  } finally {
    await Promise.all([grynya.stop(), modern.stop()]);
  }
  return [...rows, '', ...figures];
}
