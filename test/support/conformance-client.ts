// A small MCP client built on @klym/core's pool, for the conformance suite's client scenarios: the suite
// runs it with the URL of its test server as the last argument (and MCP_CONFORMANCE_SCENARIO set). It opens
// the pool over that one upstream (Streamable HTTP), lists the tools, and calls each once with arguments
// made from its input schema (a number is 1, a string "x"), then closes the pool. Exits 1 on a failure.
// The auth scenarios hand it credentials in MCP_CONFORMANCE_CONTEXT (JSON: `client_id` with `client_secret`,
// or with `private_key_pem` and `signing_algorithm`), which become the upstream's `auth`; the suite names no
// issuer, so the one the scenario's server names in its protected resource metadata is taken as `auth.issuer`
// (a test trusts its server; a configuration names the issuer it registered the client with).
import { createSessionPool, type PoolTool, type UpstreamAuth } from '@klym/core';

const url = process.argv.at(-1) ?? '';

/** The first authorization server the protected resource metadata of `resource` names (RFC 9728: under its path, else at the root). */
async function issuerNamedBy(resource: string): Promise<string> {
  const { origin, pathname } = new URL(resource);
  for (const metadata of [`${origin}/.well-known/oauth-protected-resource${pathname}`, `${origin}/.well-known/oauth-protected-resource`]) {
    const response = await fetch(metadata);
    const named = response.ok ? ((await response.json()) as { authorization_servers?: string[] }).authorization_servers?.[0] : undefined;
    if (named !== undefined) return named;
  }
  throw new Error(`${resource} names no authorization server in its protected resource metadata`);
}

/** The credentials a scenario hands the client, as `upstreams.<name>.auth`. */
async function authOf(context: string | undefined): Promise<UpstreamAuth | undefined> {
  if (context === undefined) return undefined;
  const {
    client_id: clientId,
    client_secret: clientSecret,
    private_key_pem: privateKey,
    signing_algorithm: algorithm,
  } = JSON.parse(context) as Record<string, string | undefined>;
  if (clientId === undefined || (clientSecret === undefined && privateKey === undefined)) return undefined;
  const issuer = await issuerNamedBy(url);
  if (clientSecret !== undefined) return { type: 'client_credentials', clientId, clientSecret, issuer };
  return { type: 'private_key_jwt', clientId, privateKey: privateKey as string, issuer, ...(algorithm === undefined ? {} : { algorithm }) };
}

/** A value of a JSON Schema `type`. */
const sample = (type: string | undefined): unknown =>
  type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : type === 'array' ? [] : type === 'object' ? {} : 'x';

/** Arguments that satisfy `tool`'s input schema's required properties, by their type. */
function sampleArguments(tool: PoolTool): Record<string, unknown> {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, { readonly type?: string }>;
  return Object.fromEntries((tool.inputSchema.required ?? []).map((name) => [name, sample(properties[name]?.type)]));
}

const auth = await authOf(process.env['MCP_CONFORMANCE_CONTEXT']);
// One session: the suite's test servers keep one client's state (sse-retry answers a call on whichever GET
// stream opens after it), and a command that makes its calls one by one needs no more.
const pool = await createSessionPool({
  upstreams: { conformance: { url, transport: 'streamable-http', pool: { min: 1, max: 1 }, ...(auth === undefined ? {} : { auth }) } },
});
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
