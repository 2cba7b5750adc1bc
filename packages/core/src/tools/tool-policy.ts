import { KlymError } from '../errors.ts';
import type { PoolTool } from '../pool/session-pool.ts';

/** Which upstream tools a run may call. Names are namespaced (`grynya__query_graph`); `*` matches any run of characters. */
export interface ToolSelection {
  /** Only tools matching one of these patterns. @default every tool */
  readonly allow?: readonly string[];
  /** Never tools matching one of these patterns; wins over `allow`. @default [] */
  readonly deny?: readonly string[];
  /** A named policy (`read-only`, or one from `policies`): tools outside it are denied. @default none */
  readonly policy?: string;
  /** Tools whose every call waits for the caller's approval before it is sent (a task's run only). @default [] */
  readonly approval?: readonly string[];
}

/** A named policy: which tools it permits. `read-only` is built in (`{ readOnly: true }`). */
export interface ToolPolicy {
  /** Only tools (namespaced patterns) matching one of these. @default every tool */
  readonly allow?: readonly string[];
  /** Never tools (namespaced patterns) matching one of these. @default [] */
  readonly deny?: readonly string[];
  /** Only read-only tools: annotated `readOnlyHint`, or configured as read-only. @default false */
  readonly readOnly?: boolean;
}

/** A call that shows an upstream works: a read-only tool and its arguments. */
export interface ToolProbe {
  /** The tool's name on its upstream (`query_graph`). */
  readonly tool: string;
  /** @default {} */
  readonly args?: Readonly<Record<string, unknown>>;
}

/** Rules for one upstream's tools; patterns here are over the upstream's own tool names (`query_*`). */
export interface UpstreamToolRules {
  /** Only tools matching one of these. @default every tool */
  readonly allow?: readonly string[];
  /** Never tools matching one of these; wins over `allow`. @default [] */
  readonly deny?: readonly string[];
  /** Tools that count as read-only though not annotated `readOnlyHint`. @default [] */
  readonly readOnlyTools?: readonly string[];
  /** Tools whose every call waits for the caller's approval before it is sent (a task's run only). @default [] */
  readonly approval?: readonly string[];
  /** The self-check's probe of this upstream. @default `query_graph` with `RETURN 1` where there is one, else a read-only tool that needs no arguments */
  readonly probe?: ToolProbe;
}

/** The built-in policy: only tools annotated `readOnlyHint`, plus those configured as read-only. */
export const READ_ONLY_POLICY = 'read-only';

/** Whether a tool may be called, and if not, which policy says so. */
export type ToolAccess = { readonly allowed: true } | { readonly allowed: false; readonly policy: string; readonly reason: string };

/** Everything that decides access, for one run. */
export interface AccessRules {
  readonly selection?: ToolSelection;
  readonly upstreams?: Readonly<Record<string, UpstreamToolRules>>;
  readonly policies?: Readonly<Record<string, ToolPolicy>>;
  readonly readOnlyTools?: readonly string[];
}

/** Whether `name` matches a glob `pattern` in which `*` stands for any run of characters (and nothing else is special). */
export function matchesPattern(name: string, pattern: string): boolean {
  // A glob matcher that goes back only to the last `*`: O(name × pattern) at worst. A RegExp of `.*`s
  // backtracks for minutes on a pattern like `*a*a*a*a*a*a*a*a*b`, and callers choose patterns.
  let at = 0;
  let next = 0;
  let star = -1;
  let resume = 0;
  while (at < name.length) {
    if (next < pattern.length && pattern[next] === '*') {
      star = next++;
      resume = at;
    } else if (next < pattern.length && pattern[next] === name[at]) {
      next++;
      at++;
    } else if (star !== -1) {
      next = star + 1;
      at = ++resume;
    } else {
      return false;
    }
  }
  while (pattern[next] === '*') next++;
  return next === pattern.length;
}

const deny = (policy: string, reason: string): ToolAccess => ({ allowed: false, policy, reason });

const matchesAny = (name: string, patterns: readonly string[] | undefined): string | undefined => patterns?.find((pattern) => matchesPattern(name, pattern));

/** Whether a tool is read-only: annotated `readOnlyHint: true`, or listed as read-only for the run or its upstream. */
export function isReadOnlyTool(tool: PoolTool, rules: AccessRules): boolean {
  return (
    tool.annotations?.readOnlyHint === true ||
    matchesAny(tool.name, rules.readOnlyTools) !== undefined ||
    matchesAny(tool.originalName, rules.upstreams?.[tool.upstream]?.readOnlyTools) !== undefined
  );
}

/**
 * The rule that makes `tool`'s calls wait for the caller's approval (`tools.approval`, the run's or its
 * upstream's), in words; `undefined` when none does.
 */
export function approvalRule(tool: PoolTool, rules: AccessRules): string | undefined {
  const run = matchesAny(tool.name, rules.selection?.approval);
  if (run !== undefined) return `tools.approval "${run}"`;
  const upstream = matchesAny(tool.originalName, rules.upstreams?.[tool.upstream]?.approval);
  return upstream === undefined ? undefined : `upstream "${tool.upstream}" tools.approval "${upstream}"`;
}

/**
 * Checks the rules once, up front: an unknown policy name is a `CONFIG_INVALID` error naming the policies
 * there are, and a policy may not redefine the built-in `read-only`.
 * @throws {KlymError} `CONFIG_INVALID`
 */
export function assertAccessRules(rules: AccessRules): void {
  const policies = rules.policies ?? {};
  if (Object.hasOwn(policies, READ_ONLY_POLICY)) {
    throw new KlymError('CONFIG_INVALID', `Policy "${READ_ONLY_POLICY}" is built in and cannot be redefined`);
  }
  const name = rules.selection?.policy;
  if (name !== undefined && name !== READ_ONLY_POLICY && !Object.hasOwn(policies, name)) {
    const known = [READ_ONLY_POLICY, ...Object.keys(policies)].map((policy) => `"${policy}"`).join(', ');
    throw new KlymError('CONFIG_INVALID', `Unknown tool policy "${name}"; known policies: ${known}`);
  }
}

/**
 * Decides whether `tool` may be called under `rules`: first its upstream's allow/deny lists, then the run's,
 * then the run's named policy. A denial names the policy that made it.
 */
export function toolAccess(tool: PoolTool, rules: AccessRules): ToolAccess {
  const upstream = rules.upstreams?.[tool.upstream];
  const upstreamPolicy = `upstream "${tool.upstream}" rules`;
  const upstreamDenied = matchesAny(tool.originalName, upstream?.deny);
  if (upstreamDenied !== undefined) return deny(upstreamPolicy, `"${tool.originalName}" matches the deny pattern "${upstreamDenied}"`);
  if (upstream?.allow !== undefined && matchesAny(tool.originalName, upstream.allow) === undefined) {
    return deny(upstreamPolicy, `"${tool.originalName}" matches no allow pattern (${upstream.allow.join(', ')})`);
  }

  const selection = rules.selection ?? {};
  const runDenied = matchesAny(tool.name, selection.deny);
  if (runDenied !== undefined) return deny('run deny list', `"${tool.name}" matches the deny pattern "${runDenied}"`);
  if (selection.allow !== undefined && matchesAny(tool.name, selection.allow) === undefined) {
    return deny('run allow list', `"${tool.name}" matches no allow pattern (${selection.allow.join(', ')})`);
  }

  if (selection.policy === undefined) return { allowed: true };
  const name = selection.policy;
  const policy: ToolPolicy = name === READ_ONLY_POLICY ? { readOnly: true } : (rules.policies?.[name] ?? {});
  const label = `policy "${name}"`;
  const policyDenied = matchesAny(tool.name, policy.deny);
  if (policyDenied !== undefined) return deny(label, `"${tool.name}" matches its deny pattern "${policyDenied}"`);
  if (policy.allow !== undefined && matchesAny(tool.name, policy.allow) === undefined) {
    return deny(label, `"${tool.name}" matches none of its allow patterns (${policy.allow.join(', ')})`);
  }
  if (policy.readOnly === true && !isReadOnlyTool(tool, rules)) {
    return deny(label, `"${tool.name}" is not read-only (not annotated readOnlyHint, nor configured as read-only)`);
  }
  return { allowed: true };
}
