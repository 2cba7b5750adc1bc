import { createHash } from 'node:crypto';
import { KlymError } from '../errors.ts';

/**
 * Separates the upstream's name from the tool's in a namespaced tool name: `grynya__query_graph`.
 * Upstream names cannot contain it nor end in `_`, so the first `__` of a namespaced name is always
 * the separator.
 */
export const TOOL_NAME_SEPARATOR = '__';

/** Longest name an LLM function may have (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`); MCP allows 128. */
export const MAX_TOOL_NAME_LENGTH = 64;

const UPSTREAM_NAME = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/;
const MAX_UPSTREAM_NAME_LENGTH = 32;

/**
 * Throws `CONFIG_INVALID` unless `name` can prefix tool names: letters and digits in groups joined by
 * single `-` or `_`, at most 32 characters (`grynya`, `server-everything`, `my_memory`).
 */
export function assertUpstreamName(name: string): void {
  if (!UPSTREAM_NAME.test(name) || name.length > MAX_UPSTREAM_NAME_LENGTH) {
    throw new KlymError(
      'CONFIG_INVALID',
      `Expected upstream name to be letters and digits joined by single "-" or "_" (at most ${MAX_UPSTREAM_NAME_LENGTH} characters), got ${JSON.stringify(name)}`,
      { upstream: name },
    );
  }
  if (name === BUILT_IN_NAMESPACE) {
    throw new KlymError(
      'CONFIG_INVALID',
      `Expected an upstream name other than "${BUILT_IN_NAMESPACE}": Klym's own tools (${BUILT_IN_NAMESPACE}__read_artifact, …) are named under it`,
      { upstream: name },
    );
  }
}

/** The namespace of Klym's own tools, offered to every run beside the upstreams' (`klym__read_artifact`): no upstream may take it. */
export const BUILT_IN_NAMESPACE = 'klym';

/**
 * The namespaced name of an upstream tool, valid both as an MCP tool name and as an LLM function name.
 * Characters outside `[A-Za-z0-9_-]` become `_`; a name that would pass 64 characters is cut and given a
 * short hash of the original, so distinct long names stay distinct.
 */
export function namespaceToolName(upstream: string, toolName: string): string {
  const prefix = upstream + TOOL_NAME_SEPARATOR;
  const safe = toolName.replace(/[^A-Za-z0-9_-]/g, '_') || '_';
  if (prefix.length + safe.length <= MAX_TOOL_NAME_LENGTH) return prefix + safe;
  const hash = createHash('sha256').update(toolName).digest('hex').slice(0, 8);
  return `${prefix}${safe.slice(0, MAX_TOOL_NAME_LENGTH - prefix.length - hash.length - 1)}_${hash}`;
}

/** The upstream part of a namespaced name, or `undefined` when `name` has no separator. */
export function upstreamOfToolName(name: string): string | undefined {
  const at = name.indexOf(TOOL_NAME_SEPARATOR);
  return at > 0 ? name.slice(0, at) : undefined;
}
