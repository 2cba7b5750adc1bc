import type { SessionPool } from '../../pool/session-pool.ts';
import type { UpstreamStatus } from '../../pool/upstream-status.ts';
import type { Redactor } from '../../redact.ts';
import { READ_ONLY_POLICY, approvalRule, isReadOnlyTool, toolAccess, type ToolSelection } from '../../tools/tool-policy.ts';
import type { QuotaView } from '../admission/principal-quotas.ts';
import type { RequestLimits, TaskStatus } from '../store/task-types.ts';
import { viewBudgetLimits, type BudgetLimitsView } from './task-views.ts';

/** One upstream in `describe_capabilities`: its state, and how many tools it listed or why it could not. */
export interface UpstreamCapabilityView {
  readonly state: UpstreamStatus['state'] | 'unknown';
  /** The protocol revision the pool speaks to it (`2026-07-28`, `2025-11-25`, …), once a session opened. */
  readonly protocol_version?: string;
  /** Tools it listed (some may be denied to tasks). */
  readonly tools?: number;
  /** Why it could not list its tools (secrets removed). */
  readonly error?: string;
}

/** A tool a task may call. */
export interface ToolCapabilityView {
  /** The namespaced name, for `tools.allow` / `tools.deny`. */
  readonly name: string;
  /** It counts as read-only: the `read-only` policy permits it. */
  readonly read_only?: true;
  /** Each call of it in a task waits for the caller's approval (the server's `tools.approval`, or its upstream's). */
  readonly needs_approval?: true;
  /** The first 160 characters of its description. */
  readonly description: string;
}

/** What `describe_capabilities` answers: what a task may use here. */
export interface CapabilitiesView {
  readonly upstreams: Readonly<Record<string, UpstreamCapabilityView>>;
  /** The tools a task may call under the server's rules (a caller can only narrow them). */
  readonly tools: readonly ToolCapabilityView[];
  readonly models: readonly string[];
  readonly default_model: string;
  /** Policy names for `tools.policy`. */
  readonly policies: readonly string[];
  /** The server's own selection, which every task runs under. */
  readonly server_tool_policy: ToolSelection;
  readonly budget: { readonly default: BudgetLimitsView; readonly max: BudgetLimitsView };
  readonly record_result_default: boolean;
  /** The caller's quotas (`tasks.perPrincipal`) and its tasks running and waiting now. */
  readonly quota?: QuotaView;
}

/** One upstream in the health report. */
export interface UpstreamHealthView {
  readonly state: UpstreamStatus['state'];
  readonly transport: UpstreamStatus['transport'];
  /** The protocol revision the pool speaks to it, once a session opened. */
  readonly protocolVersion?: string;
  /** Sessions open now. */
  readonly sessions: number;
  readonly breaker: UpstreamStatus['breaker']['state'];
  /** Why it is `down`: `connect-failed`, or `closed-after-connect` (its sessions die right after connecting). */
  readonly reason?: NonNullable<UpstreamStatus['reason']>;
}

/** The health report (`GET /healthz`): upstream states and task counts, never a URL or a secret. */
export interface HealthView {
  /** `ok` when every upstream is ready. */
  readonly status: 'ok' | 'degraded';
  readonly upstreams: Readonly<Record<string, UpstreamHealthView>>;
  readonly tasks: Readonly<Record<TaskStatus, number>>;
}

/**
 * What tasks may use: every upstream with its state, and the tools a task may call, each decided by
 * {@link toolAccess} under the same rules the runs apply (upstream allow/deny, the server's selection and
 * policy, read-only tools). Upstream errors pass through `redactor`. It answers at once for an upstream
 * still connecting or down: its state and why, not a wait for its connect. With `quota`, the caller's quotas and use.
 */
export async function describeCapabilities(
  pool: SessionPool,
  limits: RequestLimits,
  redactor: Redactor,
  recordResultDefault: boolean,
  quota?: QuotaView,
): Promise<CapabilitiesView> {
  const listing = await pool.listTools({ waitForConnect: false });
  const status = pool.status();
  const upstreams: Record<string, UpstreamCapabilityView> = {};
  for (const name of pool.upstreams) {
    const report = listing.upstreams[name];
    const protocolVersion = status[name]?.protocolVersion;
    upstreams[name] = {
      state: status[name]?.state ?? 'unknown',
      ...(protocolVersion === undefined ? {} : { protocol_version: protocolVersion }),
      ...(report === undefined
        ? { error: 'it gave no tool listing' }
        : report.ok
          ? { tools: report.toolCount }
          : { error: redactor.text(report.error.message) }),
    };
  }
  const tools = listing.tools
    .filter((tool) => toolAccess(tool, limits).allowed)
    .map((tool): ToolCapabilityView => ({
      name: tool.name,
      ...(isReadOnlyTool(tool, limits) ? { read_only: true as const } : {}),
      ...(approvalRule(tool, limits) === undefined ? {} : { needs_approval: true as const }),
      description: redactor.text((tool.description ?? tool.title ?? '').slice(0, 160)),
    }));
  return {
    upstreams,
    tools,
    models: limits.models,
    default_model: limits.models[0] as string,
    policies: [READ_ONLY_POLICY, ...Object.keys(limits.policies ?? {})],
    server_tool_policy: limits.selection ?? {},
    budget: { default: viewBudgetLimits(limits.defaultBudget), max: viewBudgetLimits(limits.maxBudget) },
    record_result_default: recordResultDefault,
    ...(quota === undefined ? {} : { quota }),
  };
}

/** The health report of a pool and a task manager's counts. */
export function viewHealth(pool: SessionPool, tasks: Readonly<Record<TaskStatus, number>>): HealthView {
  const status = pool.status();
  const upstreams: Record<string, UpstreamHealthView> = {};
  for (const [name, upstream] of Object.entries(status)) {
    upstreams[name] = {
      state: upstream.state,
      transport: upstream.transport,
      ...(upstream.protocolVersion === undefined ? {} : { protocolVersion: upstream.protocolVersion }),
      sessions: upstream.sessions.live,
      breaker: upstream.breaker.state,
      ...(upstream.reason === undefined ? {} : { reason: upstream.reason }),
    };
  }
  return { status: Object.values(status).every((upstream) => upstream.state === 'ready') ? 'ok' : 'degraded', upstreams, tasks };
}
