// A small MCP client built on @klym/core's pool, for the conformance suite's client scenarios: the suite
// runs it with the URL of its test server as the last argument (and MCP_CONFORMANCE_SCENARIO set). It opens
// the pool over that one upstream (Streamable HTTP), lists the tools, and calls each once with arguments
// made from its input schema (a number is 1, a string "x"), then closes the pool. Exits 1 on a failure.
import { createSessionPool, type PoolTool } from '@klym/core';

const url = process.argv.at(-1) ?? '';

/** A value of a JSON Schema `type`. */
const sample = (type: string | undefined): unknown => (type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : type === 'array' ? [] : type === 'object' ? {} : 'x');

/** Arguments that satisfy `tool`'s input schema's required properties, by their type. */
function sampleArguments(tool: PoolTool): Record<string, unknown> {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, { readonly type?: string }>;
  return Object.fromEntries((tool.inputSchema.required ?? []).map((name) => [name, sample(properties[name]?.type)]));
}

const pool = await createSessionPool({ upstreams: { conformance: { url, transport: 'streamable-http' } } });
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
