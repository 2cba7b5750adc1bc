// Scenario 1 (issue #2): what the pool adds to a call. A pooled `callTool` through @klym/core against the raw
// SDK `Client.callTool` (the v2 client the pool is built on) on a session that is already open: same upstream
// process, same tool, per transport and protocol era, measured side by side in one run. Over HTTP the raw
// client is given the HTTP client the pool uses (its `fetch`, whose POSTs go through `undici.request`), so the
// ratio is what the pool adds and not what the HTTP client saves (#34); the raw client on the SDK's default,
// Node's global `fetch`, runs in the same rounds as a second baseline.
import { createSessionPool, type UpstreamConfig } from '@klym/core';
import { Client, SSEClientTransport, StreamableHTTPClientTransport, type ClientOptions, type FetchLike, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
// The pool's own fetch, an internal of @klym/core's (not exported): the same code, a connection pool of its own.
import { createUpstreamFetch, type UpstreamFetch } from '../packages/core/src/pool/upstream-fetch.ts';
import { serverEverythingStdio, startFakeGrynyaProcess, startMcp20260728UpstreamProcess } from './servers.ts';
import { figure, ms, ratio, summarize, type Summary } from './stats.ts';

interface Case {
  readonly transport: string;
  readonly key: string;
  readonly upstream: UpstreamConfig;
  /** The raw client's transport, given a `fetch` (over HTTP; the SDK's default when none). */
  readonly rawTransport: (fetch?: FetchLike) => Transport;
  readonly http: boolean;
  readonly tool: string;
  readonly args: Record<string, unknown>;
  /** How the raw client settles the era: as the pool does for the upstream. @default the SDK's, `initialize` */
  readonly rawOptions?: ClientOptions;
}

type Call = () => Promise<unknown>;

/** A transport's options giving it `fetch`, or none (the SDK's default fetch). */
const withFetch = (fetch: FetchLike | undefined): { fetch: FetchLike } | undefined => (fetch === undefined ? undefined : { fetch });

/** The HTTP clients a raw contender is given, as the table names them. */
const SAME_FETCH = "the pool's fetch (undici)";
const DEFAULT_FETCH = "the SDK's default (Node's fetch)";

export async function poolOverhead(options: { rounds: number; perRound: number }): Promise<string[]> {
  const grynya = await startFakeGrynyaProcess();
  const mcp20260728Upstream = await startMcp20260728UpstreamProcess();
  const stdio = serverEverythingStdio();
  const cases: Case[] = [
    {
      transport: 'legacy SSE',
      key: 'sse',
      upstream: { url: grynya.sseUrl, transport: 'sse' },
      rawTransport: (fetch) => new SSEClientTransport(new URL(grynya.sseUrl), withFetch(fetch)),
      http: true,
      tool: 'query_graph',
      args: { query: 'RETURN 1' },
    },
    {
      transport: 'Streamable HTTP',
      key: 'streamable_http',
      upstream: { url: grynya.mcpUrl, transport: 'streamable-http' },
      rawTransport: (fetch) => new StreamableHTTPClientTransport(new URL(grynya.mcpUrl), withFetch(fetch)),
      http: true,
      tool: 'query_graph',
      args: { query: 'RETURN 1' },
    },
    {
      transport: 'stdio',
      key: 'stdio',
      upstream: { ...stdio, pool: { max: 1 } },
      rawTransport: () => new StdioClientTransport({ ...stdio, stderr: 'ignore' }),
      http: false,
      tool: 'echo',
      args: { message: 'hi' },
    },
    {
      transport: 'Streamable HTTP, 2026-07-28',
      key: 'stateless_2026',
      upstream: { url: mcp20260728Upstream.url },
      rawTransport: (fetch) => new StreamableHTTPClientTransport(new URL(mcp20260728Upstream.url), withFetch(fetch)),
      rawOptions: { versionNegotiation: { mode: 'auto' } },
      http: true,
      tool: 'echo',
      args: { message: 'hi' },
    },
  ];
  const rows = [
    "| transport | raw SDK's HTTP client | pooled median | pooled p99 | raw SDK median | raw SDK p99 | ratio of medians | ratio of p99s |",
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  const figures: string[] = [];
  try {
    for (const benchCase of cases) {
      await using pool = await createSessionPool({ upstreams: { up: { ...benchCase.upstream, pool: { min: 1, max: 1 } } } });
      await pool.warmedUp();
      const sameFetch: UpstreamFetch | undefined = benchCase.http ? createUpstreamFetch(undefined) : undefined;
      const raw = await rawClient(benchCase, sameFetch?.fetch);
      const rawDefault = benchCase.http ? await rawClient(benchCase, undefined) : undefined;
      try {
        const call =
          (client: Client): Call =>
          () =>
            client.callTool({ name: benchCase.tool, arguments: benchCase.args });
        const contenders: Record<string, Call> = { pooled: () => pool.callTool('up', benchCase.tool, benchCase.args), raw: call(raw) };
        if (rawDefault !== undefined) contenders.rawDefault = call(rawDefault);
        await sideBySideAll(2, 100, contenders); // warm-up: JIT, sockets, caches
        const summaries = await sideBySideAll(options.rounds, options.perRound, contenders);
        const pooled = summaries.pooled as Summary;
        const row = (client: string, baseline: Summary): string =>
          `| ${benchCase.transport} | ${client} | ${ms(pooled.median)} | ${ms(pooled.p99)} | ${ms(baseline.median)} | ${ms(baseline.p99)} | ${ratio(pooled.median / baseline.median)} | ${ratio(pooled.p99 / baseline.p99)} |`;
        rows.push(row(benchCase.http ? SAME_FETCH : 'none (stdio)', summaries.raw as Summary));
        figures.push(figure(`pooled_ratio_${benchCase.key}`, pooled.median / (summaries.raw as Summary).median));
        if (summaries.rawDefault !== undefined) {
          rows.push(row(DEFAULT_FETCH, summaries.rawDefault));
          figures.push(figure(`pooled_ratio_${benchCase.key}_default_fetch`, pooled.median / summaries.rawDefault.median));
        }
      } finally {
        await Promise.all([raw.close(), rawDefault?.close()]);
        await sameFetch?.close();
      }
    }
  } finally {
    await Promise.all([grynya.stop(), mcp20260728Upstream.stop()]);
  }
  return [...rows, '', ...figures];
}

/** A raw SDK client connected to the case's upstream, its transport given `fetch` (the SDK's default when none). */
async function rawClient(benchCase: Case, fetch: FetchLike | undefined): Promise<Client> {
  const client = new Client({ name: 'bench-raw', version: '1.0.0' }, benchCase.rawOptions);
  await client.connect(benchCase.rawTransport(fetch));
  return client;
}

/**
 * `sideBySide` for any number of contenders: each round runs `perRound` calls of each, in an order rotated
 * from round to round (each goes first, in the middle and last in turn), so drift falls on all alike.
 */
async function sideBySideAll(rounds: number, perRound: number, contenders: Readonly<Record<string, Call>>): Promise<Record<string, Summary>> {
  const names = Object.keys(contenders);
  const samples = Object.fromEntries(names.map((name) => [name, [] as number[]]));
  for (let round = 0; round < rounds; round++) {
    for (let turn = 0; turn < names.length; turn++) {
      const name = names[(round + turn) % names.length] as string;
      const run = contenders[name] as Call;
      const taken = samples[name] as number[];
      for (let index = 0; index < perRound; index++) {
        const started = performance.now();
        await run();
        taken.push(performance.now() - started);
      }
    }
  }
  return Object.fromEntries(names.map((name) => [name, summarize(samples[name] as number[])]));
}
