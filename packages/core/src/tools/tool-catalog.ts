import type { CallToolResult } from '@modelcontextprotocol/client';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/client/validators/ajv';
import { dynamicTool, jsonSchema, type JSONSchema7, type ToolSet } from 'ai';
import { KlymError } from '../errors.ts';
import { raceAbort } from '../internal/abort.ts';
import type { PoolTool, SessionPool } from '../pool/session-pool.ts';
import type { SessionScope } from '../pool/session-scope.ts';
import type { UpstreamLogEntry } from '../pool/upstream-session.ts';
import { traceToolCall, type ToolCallTracing } from '../telemetry/tool-call-span.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import { approvalRule, assertAccessRules, isReadOnlyTool, toolAccess, type AccessRules, type ToolAccess } from './tool-policy.ts';
import { resolveProbe, type ResolvedProbe } from './tool-probe.ts';
import { toModelOutput } from './tool-result.ts';
import { createToolDescriber, type ToolDescriber } from './tools-prompt.ts';

/** An upstream tool as a run sees it: the pool's tool, whether it is read-only, and whether the run may call it. */
export interface CatalogTool extends PoolTool {
  readonly readOnly: boolean;
  readonly access: ToolAccess;
  /** The rule that makes its calls wait for the caller's approval, in words (see `ToolSelection.approval`). */
  readonly approval?: string;
}

/** Per upstream: how many tools it listed, or why it could not. */
export type CatalogUpstream = { readonly ok: true; readonly toolCount: number } | { readonly ok: false; readonly error: string };

/** Options of {@link createToolCatalog}. */
export interface ToolCatalogOptions extends AccessRules {
  readonly pool: SessionPool;
  /** Stops waiting for the listing (which other runs may share, so it is not cancelled). */
  readonly signal?: AbortSignal;
}

/** Where a catalog's tools send their calls, and what they report while they run. */
export interface ToolCallHooks {
  /**
   * The scope the calls belong to (a task's): `task`-scoped upstreams serve them on the scope's own session.
   * @default the pool (each call to a `task`-scoped upstream then gets a session of its own)
   */
  readonly scope?: SessionScope;
  /** Time limit of one call. @default the upstream's `timeouts.requestMs` */
  readonly timeoutMs?: number;
  /** What the upstream logs while it serves a call. */
  readonly onLog?: (entry: UpstreamLogEntry, toolCallId: string) => void;
  /** How long the upstream took, measured around the call itself. */
  readonly onDuration?: (toolCallId: string, durationMs: number) => void;
  /**
   * Called right before a call's request goes to the upstream, once its access and arguments were
   * checked (a refused call never gets this far): the moment to record that it was sent. A hook that
   * returns a Promise is waited for before the request goes out. A hook that throws (or whose Promise
   * rejects) fails the call, unsent.
   */
  readonly onRequest?: (call: { readonly toolCallId: string; readonly toolName: string; readonly input: unknown }) => void | Promise<void>;
  /**
   * Traces each call: a `tools/call <tool>` span of the MCP conventions, whose W3C context goes in the
   * request's `params._meta`. @default none: no span, and no `_meta` added
   */
  readonly tracing?: ToolCallTracing;
  /**
   * What the model gets of a call's result: given the result, answers the one the model reads (a big
   * result kept as an artifact, and a reference to it in its place). @default the result as it is
   */
  readonly keep?: (toolName: string, result: CallToolResult) => Promise<CallToolResult>;
  /** A result's text as the model reads it (a run's remembers each result's). @default `resultText` */
  readonly resultText?: (result: CallToolResult) => string;
  /**
   * Whether the caller approved this call of a tool that needs approval (`CatalogTool.approval`). A call not
   * approved is refused (`TOOL_DENIED`): only a task's step can wait for a caller. @default none approved
   */
  readonly approved?: (toolCallId: string) => boolean;
}

/** The pool's tools for one run, with the run's policies applied. */
export interface ToolCatalog {
  /** Every listed tool, allowed or denied, in listing order. */
  readonly tools: readonly CatalogTool[];
  /** The tools the run may call. */
  readonly allowed: readonly CatalogTool[];
  /** Every configured upstream: its tool count, or why it is unavailable. Never silently left out. */
  readonly upstreams: Readonly<Record<string, CatalogUpstream>>;
  /** Per upstream, the call that shows it works (the self-check's probe), or why there is none. */
  readonly probes: Readonly<Record<string, ResolvedProbe>>;
  /**
   * The tools as AI SDK dynamic tools, keyed by namespaced name. Each call goes through the pool with the
   * run's abort signal; a denied tool's call throws `TOOL_DENIED` naming the policy; arguments are checked
   * against the tool's input schema before anything is sent.
   */
  toolSet(hooks?: ToolCallHooks): ToolSet;
  /** The tools described for a system prompt, per upstream; what `{{tools}}` is replaced with. */
  describe(): string;
  /** Characters of the allowed tools' definitions as JSON (name, description, input schema): what a call's tool list weighs. */
  definitionChars(): number;
}

/**
 * Lists the pool's tools and applies a run's rules to them.
 *
 * @throws {KlymError} `CONFIG_INVALID` for an unknown policy name.
 * @example
 * ```ts
 * const catalog = await createToolCatalog({ pool, selection: { policy: 'read-only' } })
 * streamText({ model, tools: catalog.toolSet(), system: `Tools:\n${catalog.describe()}`, prompt })
 * ```
 */
export async function createToolCatalog(options: ToolCatalogOptions): Promise<ToolCatalog> {
  assertAccessRules(options);
  // The listing is cached and shared by every run of the pool: a run that gives up stops waiting for it,
  // but does not cancel it for the others (nor leave an abort listener on the request).
  const listing = options.signal === undefined ? await options.pool.listTools() : await raceAbort(options.pool.listTools(), options.signal);
  const tools: CatalogTool[] = listing.tools.map((tool) => {
    const approval = approvalRule(tool, options);
    return { ...tool, readOnly: isReadOnlyTool(tool, options), access: toolAccess(tool, options), ...(approval === undefined ? {} : { approval }) };
  });
  const upstreams: Record<string, CatalogUpstream> = {};
  for (const name of options.pool.upstreams) {
    const report = listing.upstreams[name];
    upstreams[name] =
      report === undefined ? { ok: false, error: `Upstream "${name}" gave no tool listing` } : report.ok ? report : { ok: false, error: report.error.message };
  }
  const probes: Record<string, ResolvedProbe> = {};
  for (const [name, report] of Object.entries(upstreams)) {
    probes[name] = report.ok ? resolveProbe(name, listing.tools, options) : { ok: false, reason: `it is unavailable: ${report.error}` };
  }
  const validators = validatorsOf(options.pool);
  const describer = describerOf(options.pool);

  const catalog: ToolCatalog = {
    tools,
    allowed: tools.filter((tool) => tool.access.allowed),
    upstreams,
    probes,
    toolSet: (hooks = {}) => Object.fromEntries(tools.map((tool) => [tool.name, toAiTool(tool, options.pool, validators, hooks)])),
    describe: () => describer.describe(catalog),
    definitionChars: () => describer.definitionChars(catalog.allowed),
  };
  return catalog;
}

type Validate = (input: unknown) => { valid: boolean; errorMessage?: string | undefined };

/** One Ajv per pool, and its compiled validators by schema object. */
interface Validators {
  readonly ajv: AjvJsonSchemaValidator;
  readonly compiled: WeakMap<object, Validate | undefined>;
}

/**
 * Compiling a schema costs milliseconds; a run lists the same tools as the last (the pool caches the
 * listing, schema objects included), so each schema is compiled once per pool, not once per run.
 */
const validatorCache = new WeakMap<SessionPool, Validators>();
function validatorsOf(pool: SessionPool): Validators {
  let validators = validatorCache.get(pool);
  if (validators === undefined) validatorCache.set(pool, (validators = { ajv: new AjvJsonSchemaValidator(), compiled: new WeakMap() }));
  return validators;
}

/** Likewise the tools' descriptions: the same listing every run, described once per pool. */
const describerCache = new WeakMap<SessionPool, ToolDescriber>();
function describerOf(pool: SessionPool): ToolDescriber {
  let describer = describerCache.get(pool);
  if (describer === undefined) describerCache.set(pool, (describer = createToolDescriber()));
  return describer;
}

function compiledValidator(tool: CatalogTool, validators: Validators): Validate | undefined {
  const { compiled, ajv } = validators;
  if (compiled.has(tool.inputSchema)) return compiled.get(tool.inputSchema);
  let validate: Validate | undefined;
  try {
    validate = ajv.getValidator(tool.inputSchema as Parameters<AjvJsonSchemaValidator['getValidator']>[0]);
  } catch {
    // A schema Ajv cannot compile: the upstream checks the arguments itself.
  }
  compiled.set(tool.inputSchema, validate);
  return validate;
}

function toAiTool(tool: CatalogTool, pool: SessionPool, validators: Validators, hooks: ToolCallHooks): ToolSet[string] {
  const schema = { ...tool.inputSchema, properties: tool.inputSchema.properties ?? {} } as JSONSchema7;
  return dynamicTool({
    description: tool.description ?? tool.title ?? '',
    inputSchema: jsonSchema(schema, {
      validate: (value) => {
        const checked = compiledValidator(tool, validators)?.(value) ?? { valid: true };
        return checked.valid
          ? { success: true, value }
          : { success: false, error: new Error(`Invalid arguments for ${tool.name}: ${checked.errorMessage ?? 'they do not match its input schema'}`) };
      },
    }),
    execute: async (input, { toolCallId, abortSignal }) => {
      const access = tool.access;
      if (!access.allowed) {
        throw new KlymError('TOOL_DENIED', `Tool ${tool.name} is denied by ${access.policy}: ${access.reason}`, {
          upstream: tool.upstream,
          toolName: tool.originalName,
        });
      }
      if (tool.approval !== undefined && hooks.approved?.(toolCallId) !== true) {
        throw new KlymError(
          'TOOL_DENIED',
          `Tool ${tool.name} needs the caller's approval (${tool.approval}), which only a task's step can wait for: call it directly, not from a program or a run without a caller`,
          { upstream: tool.upstream, toolName: tool.originalName },
        );
      }
      const recorded = hooks.onRequest?.({ toolCallId, toolName: tool.name, input });
      // Awaited only when it is a Promise: a synchronous store's record costs the call no extra tick.
      if (recorded instanceof Promise) await recorded;
      const started = performance.now();
      const send = (meta?: TraceCarrier): Promise<CallToolResult> =>
        (hooks.scope ?? pool).callTool(tool.upstream, tool.originalName, input as Record<string, unknown>, {
          ...(abortSignal === undefined ? {} : { signal: abortSignal }),
          ...(hooks.timeoutMs === undefined ? {} : { timeoutMs: hooks.timeoutMs }),
          ...(hooks.onLog === undefined ? {} : { onLog: (entry: UpstreamLogEntry) => hooks.onLog?.(entry, toolCallId) }),
          ...(meta === undefined ? {} : { meta: { ...meta } }),
        });
      let result: CallToolResult;
      try {
        result =
          hooks.tracing === undefined
            ? await send()
            : await traceToolCall(hooks.tracing, { upstream: tool.upstream, toolName: tool.originalName, toolCallId }, send);
      } finally {
        hooks.onDuration?.(toolCallId, performance.now() - started);
      }
      return hooks.keep === undefined ? result : hooks.keep(tool.name, result);
    },
    toModelOutput: ({ output }) => toModelOutput(output as CallToolResult, hooks.resultText?.(output as CallToolResult)),
  });
}
