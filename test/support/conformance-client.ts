// A small MCP client built on @klym/core's pool, for the conformance suite's client scenarios: the suite
// runs it with the URL of its test server as the last argument (and MCP_CONFORMANCE_SCENARIO set). It opens
// the pool over that one upstream (Streamable HTTP), lists the tools, and calls each once with arguments
// made from its input schema (a number is 1, a string "x"), then closes the pool. Exits 1 on a failure.
// The auth scenarios hand it credentials in MCP_CONFORMANCE_CONTEXT (JSON: `client_id` with `client_secret`,
// or with `private_key_pem` and `signing_algorithm`), which become the upstream's `auth`.
import { createSessionPool, type PoolTool, type UpstreamAuth } from '@klym/core';

const url = process.argv.at(-1) ?? '';

/** The credentials a scenario hands the client, as `upstreams.<name>.auth`. */
function authOf(context: string | undefined): UpstreamAuth | undefined {
  if (context === undefined) return undefined;
  const { client_id: clientId, client_secret: clientSecret, private_key_pem: privateKey, signing_algorithm: algorithm } = JSON.parse(context) as Record<string, string | undefined>;
  if (clientId === undefined) return undefined;
  if (clientSecret !== undefined) return { type: 'client_credentials', clientId, clientSecret };
  if (privateKey !== undefined) return { type: 'private_key_jwt', clientId, privateKey, ...(algorithm === undefined ? {} : { algorithm }) };
  return undefined;
}

/** A value of a JSON Schema `type`. */
const sample = (type: string | undefined): unknown => (type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : type === 'array' ? [] : type === 'object' ? {} : 'x');

/** Arguments that satisfy `tool`'s input schema's required properties, by their type. */
function sampleArguments(tool: PoolTool): Record<string, unknown> {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, { readonly type?: string }>;
  return Object.fromEntries((tool.inputSchema.required ?? []).map((name) => [name, sample(properties[name]?.type)]));
}

const auth = authOf(process.env['MCP_CONFORMANCE_CONTEXT']);
// One session: the suite's test servers keep one client's state (sse-retry answers a call on whichever GET
// stream opens after it), and a command that makes its calls one by one needs no more.
const pool = await createSessionPool({ upstreams: { conformance: { url, transport: 'streamable-http', pool: { min: 1, max: 1 }, ...(auth === undefined ? {} : { auth }) } } });
try {
  const { tools, upstreams } = await pool.listTools();
  const report = upstreams['conformance'];
  if (report !== undefined && !report.ok) throw report.error;
  for (const tool of tools) {
    const result = await pool.callTool(tool.upstream, tool.originalName, sampleArguments(tool), { timeoutMs: 20_000 });
    console.log(`${tool.originalName}: ${JSON.stringify(result.content).slice(0, 200)}`);
  }
} catch (error) {
  console.error(`conformance client failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
} finally {
  await pool.close();
}
