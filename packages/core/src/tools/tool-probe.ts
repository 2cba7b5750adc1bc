import type { PoolTool } from '../pool/session-pool.ts';
import { isReadOnlyTool, toolAccess, type AccessRules } from './tool-policy.ts';

/** An upstream's probe as resolved against its listed tools: a call to make, or why there is none. */
export type ResolvedProbe =
  { readonly ok: true; readonly toolName: string; readonly args: Readonly<Record<string, unknown>> } | { readonly ok: false; readonly reason: string };

/** Probes that are known to be harmless on well-known servers: grynya-mcp-server's `query_graph` with `RETURN 1`. */
const KNOWN_PROBES: readonly { readonly tool: string; readonly args: Readonly<Record<string, unknown>> }[] = [
  { tool: 'query_graph', args: { query: 'RETURN 1' } },
];

const needsNoArguments = (tool: PoolTool): boolean => (tool.inputSchema.required ?? []).length === 0;

/**
 * Picks the call that shows `upstream` works: its configured probe; else a known harmless one (grynya's
 * `query_graph` with `RETURN 1`); else its first read-only tool that needs no arguments. A probe the
 * run's policies deny is no probe, and says so.
 */
export function resolveProbe(upstream: string, tools: readonly PoolTool[], rules: AccessRules): ResolvedProbe {
  const own = tools.filter((tool) => tool.upstream === upstream);
  const usable = (tool: PoolTool, args: Readonly<Record<string, unknown>>): ResolvedProbe => {
    const access = toolAccess(tool, rules);
    return access.allowed
      ? { ok: true, toolName: tool.name, args }
      : { ok: false, reason: `its probe ${tool.name} is denied by ${access.policy}: ${access.reason}` };
  };

  const configured = rules.upstreams?.[upstream]?.probe;
  if (configured !== undefined) {
    const tool = own.find((candidate) => candidate.originalName === configured.tool);
    return tool === undefined
      ? { ok: false, reason: `its configured probe tool "${configured.tool}" is not among its tools` }
      : usable(tool, configured.args ?? {});
  }
  for (const known of KNOWN_PROBES) {
    const tool = own.find((candidate) => candidate.originalName === known.tool);
    if (tool !== undefined) return usable(tool, known.args);
  }
  const candidate = own.find((tool) => isReadOnlyTool(tool, rules) && needsNoArguments(tool) && toolAccess(tool, rules).allowed);
  return candidate === undefined
    ? { ok: false, reason: 'it has no read-only tool that needs no arguments; configure a probe' }
    : { ok: true, toolName: candidate.name, args: {} };
}
