import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import { KlymError } from '../errors.ts';
import { realClock, type PoolClock } from './clock.ts';
import { openSessionScope, type OpenSessionScope, type SessionScope } from './session-scope.ts';
import { namespaceToolName } from './tool-name.ts';
import { Upstream } from './upstream.ts';
import type { CallToolOptions, UpstreamCall, UpstreamStatus } from './upstream-status.ts';
import { resolveUpstreamConfig, type UpstreamConfig } from './upstream-config.ts';
import type { UpstreamLogEntry } from './upstream-session.ts';
import { upstreamSecrets } from './upstream-secrets.ts';

/** Options of {@link createSessionPool}. */
export interface SessionPoolOptions {
  /** The upstream MCP servers, by name. Names prefix tool names: letters and digits joined by single `-` or `_`. */
  readonly upstreams: Readonly<Record<string, UpstreamConfig>>;
  /** How Klym introduces itself in `initialize`. @default { name: 'klym', version: '0.1.0' } */
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** Receives what upstreams log: `notifications/message`, and stderr lines of stdio servers. */
  readonly onLog?: (entry: UpstreamLogEntry) => void;
  /**
   * Receives every tool call once it has ended (through the pool or a scope of it): its upstream, tool,
   * outcome and duration, for metrics. Called synchronously; keep it cheap. A listing is not a call.
   */
  readonly onCall?: (call: UpstreamCall) => void;
  /**
   * Where the pool reads the time and starts its timers (idle sessions, the breaker's cooldown and probes,
   * `connectMs`, `maxTotalMs`, the drain deadline, call durations): for tests that move time on by hand.
   * The MCP SDK's and generic-pool's own timers (`requestMs`, `acquireMs`) stay Node's.
   * @default the real time: `performance.now()` and Node's timers
   */
  readonly clock?: PoolClock;
}

/** An upstream tool as the pool lists it. */
export interface PoolTool {
  /** Namespaced name, `<upstream>__<tool>`: unique across upstreams, valid for MCP and as an LLM function name. */
  readonly name: string;
  readonly upstream: string;
  /** The tool's name on its upstream. */
  readonly originalName: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Tool['inputSchema'];
  readonly outputSchema?: Tool['outputSchema'];
  readonly annotations?: Tool['annotations'];
}

/** Every upstream's tools, and per upstream whether its listing worked. */
export interface ToolListing {
  readonly tools: readonly PoolTool[];
  readonly upstreams: Readonly<Record<string, { readonly ok: true; readonly toolCount: number } | { readonly ok: false; readonly error: KlymError }>>;
}

/** Options of {@link SessionPool.listTools}. */
export interface ListToolsOptions {
  /** Stops waiting (the listing goes on for others); the upstreams not listed by then are reported failed. */
  readonly signal?: AbortSignal;
  /**
   * Whether to wait for an upstream that is still connecting, or down, and has no list to serve: `false`
   * reports it at once as `UPSTREAM_UNAVAILABLE` (for a quick answer such as `describe_capabilities`).
   * @default true
   */
  readonly waitForConnect?: boolean;
}

/** Options of {@link SessionPool.close}. */
export interface CloseOptions {
  /** How long borrowed sessions may take to come back before their calls fail with `POOL_CLOSED`. @default 5_000 */
  readonly drainTimeoutMs?: number;
}

/** Long-lived MCP client sessions to upstream servers, lent out one call at a time. */
export interface SessionPool extends AsyncDisposable {
  /** The configured upstreams' names. */
  readonly upstreams: readonly string[];
  /**
   * The secrets the upstreams' configurations hold (`auth` secrets, secret-named `headers` and `env` values,
   * as `upstreamSecrets` lists them): the task manager, the task service and `runAgent` keep them out of
   * logs, status and errors without being told, so that an upstream that echoes its credential in an error
   * does not show it. Optional so that a pool of an embedder's own still fits; `createSessionPool` fills it,
   * not enumerable, so that the pool printed never shows them.
   */
  readonly secrets?: readonly string[];
  /**
   * Every upstream's tools, namespaced; an upstream that cannot list them is reported in `upstreams`, not
   * dropped. An upstream's last good list is served while its refresh waits for a session.
   */
  listTools(options?: ListToolsOptions): Promise<ToolListing>;
  /**
   * Resolves once every upstream's start-up connects have settled (its `pool.min` sessions opened or
   * failed) and its tools were listed. Never rejects: failures are in `status()`.
   */
  warmedUp(): Promise<void>;
  /**
   * Calls a tool (by its upstream name) on a pooled session of `upstream`. On an upstream with
   * `sessionScope: 'task'` a call outside any scope is a scope of its own: a session opened for it and
   * closed after it, so no state passes between callers.
   */
  callTool(upstream: string, toolName: string, args?: Record<string, unknown>, options?: CallToolOptions): Promise<CallToolResult>;
  /**
   * Opens a scope for one task's (or one run's) calls: on `task`-scoped upstreams they get a session of
   * the scope's own, closed with it. Whoever opens a scope closes it; `close()` of the pool drains open ones.
   * @example
   * ```ts
   * await using scope = pool.openScope(taskId)
   * await scope.callTool('browser', 'navigate', { url }) // the same browser session for the whole task
   * ```
   */
  openScope(id: string): SessionScope;
  /** The upstream and original name behind a namespaced tool name, as of the last `listTools()`. */
  resolveTool(name: string): { readonly upstream: string; readonly toolName: string } | undefined;
  /** Per upstream: state, sessions, calls, last error. */
  status(): Readonly<Record<string, UpstreamStatus>>;
  /** Drains, then closes every session. Idempotent: later calls return the same promise. */
  close(options?: CloseOptions): Promise<void>;
}

/**
 * Opens a pool of MCP client sessions. It waits for no upstream: each opens its `pool.min` sessions and
 * lists its tools in the background (`warmedUp()` resolves when they have), and one that is slow, hung or
 * down is reported by `status()` (`connecting`, `down`), not thrown.
 *
 * @throws {KlymError} `CONFIG_INVALID` when an upstream's options are wrong.
 * @example
 * ```ts
 * await using pool = await createSessionPool({ upstreams: { grynya: { url: 'http://grynya-mcp-server:8000/sse', headers: { Host: 'localhost' } } } })
 * const result = await pool.callTool('grynya', 'query_graph', { query: 'RETURN 1' }, { timeoutMs: 5_000 })
 * ```
 */
export async function createSessionPool(options: SessionPoolOptions): Promise<SessionPool> {
  const configs = Object.entries(options.upstreams).map(([name, config]) => resolveUpstreamConfig(name, config));
  const clock = options.clock ?? realClock;
  const upstreamOptions = {
    clientInfo: options.clientInfo ?? { name: 'klym', version: '0.1.0' },
    onLog: options.onLog ?? (() => {}),
    onCall: options.onCall,
    clock,
  };
  const upstreams = new Map(configs.map((config) => [config.name, new Upstream(config, upstreamOptions)]));
  const toolIndex = new Map<string, { upstream: string; toolName: string }>();
  const scopes = new Set<OpenSessionScope>();
  let closing: Promise<void> | undefined;

  const upstreamNamed = (name: string): Upstream => {
    const upstream = upstreams.get(name);
    if (upstream === undefined) {
      throw new KlymError('UPSTREAM_NOT_FOUND', `No upstream named "${name}"; configured: ${[...upstreams.keys()].join(', ') || 'none'}`, { upstream: name });
    }
    return upstream;
  };

  // Not awaited: a hung upstream must not hold up whoever opens the pool (a server that should be listening).
  const started = Promise.allSettled([...upstreams.values()].map((upstream) => upstream.start())).then(() => {});

  const secrets = [...new Set(Object.values(options.upstreams).flatMap((config) => upstreamSecrets(config)))];
  const pool: SessionPool = {
    upstreams: [...upstreams.keys()],

    warmedUp: () => started,

    async listTools({ signal, waitForConnect = true } = {}) {
      const listings = await Promise.allSettled([...upstreams.values()].map((upstream) => upstream.listTools(signal, { waitForConnect })));
      const tools: PoolTool[] = [];
      const report: Record<string, ToolListing['upstreams'][string]> = {};
      [...upstreams.keys()].forEach((name, index) => {
        const listing = listings[index] as PromiseSettledResult<readonly Tool[]>;
        if (listing.status === 'rejected') {
          const error =
            listing.reason instanceof KlymError
              ? listing.reason
              : new KlymError('UPSTREAM_ERROR', `Upstream "${name}" could not list its tools`, { upstream: name, cause: listing.reason });
          report[name] = { ok: false, error };
          return;
        }
        try {
          const named = namespaceTools(name, listing.value);
          tools.push(...named);
          report[name] = { ok: true, toolCount: named.length };
        } catch (error) {
          report[name] = { ok: false, error: error as KlymError };
        }
      });
      toolIndex.clear();
      for (const tool of tools) toolIndex.set(tool.name, { upstream: tool.upstream, toolName: tool.originalName });
      return { tools, upstreams: report };
    },

    callTool(upstream, toolName, args = {}, callOptions) {
      if (closing) return Promise.reject(new KlymError('POOL_CLOSED', `The pool is closed; no call to ${upstream}/${toolName}`, { upstream, toolName }));
      try {
        const named = upstreamNamed(upstream);
        if (named.config.sessionScope === 'task') return callInOwnScope(upstream, toolName, args, callOptions);
        return named.callTool(toolName, args, callOptions);
      } catch (error) {
        return Promise.reject(error);
      }
    },

    openScope(id) {
      const opened: OpenSessionScope = openSessionScope(id, upstreamNamed, () => scopes.delete(opened));
      scopes.add(opened);
      return opened.scope;
    },

    resolveTool: (name) => toolIndex.get(name),

    status: () => Object.fromEntries([...upstreams].map(([name, upstream]) => [name, upstream.status()])),

    close({ drainTimeoutMs = 5_000 } = {}) {
      closing ??= (async () => {
        const deadline = clock.now() + drainTimeoutMs;
        // Sessions held by scopes are borrowed from the upstreams, whose drain waits for them: idle ones go now, busy ones when their call ends.
        const drained = [...scopes].map((scope) => scope.drain());
        // Reverse order of creation; every upstream is closed even if one fails.
        const results = await Promise.allSettled([...upstreams.values()].toReversed().map((upstream) => upstream.close(deadline)));
        await Promise.allSettled(drained);
        const failures = results.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []));
        if (failures.length > 0) throw new AggregateError(failures, `Closing the pool failed for ${failures.length} upstream(s)`);
      })();
      return closing;
    },

    [Symbol.asyncDispose]: () => pool.close(),
  };

  async function callInOwnScope(
    upstream: string,
    toolName: string,
    args: Record<string, unknown>,
    callOptions: CallToolOptions | undefined,
  ): Promise<CallToolResult> {
    const scope = pool.openScope(`${upstream}/${toolName} call`);
    try {
      return await scope.callTool(upstream, toolName, args, callOptions);
    } finally {
      await scope.close();
    }
  }

  // Not enumerable: the pool printed (`console.log`, `JSON.stringify`) never shows them.
  Object.defineProperty(pool, 'secrets', { value: secrets, enumerable: false });
  return pool;
}

function namespaceTools(upstream: string, tools: readonly Tool[]): PoolTool[] {
  const seen = new Map<string, string>();
  return tools.map((tool) => {
    const name = namespaceToolName(upstream, tool.name);
    const clash = seen.get(name);
    if (clash !== undefined) {
      throw new KlymError('TOOL_NAME_COLLISION', `Upstream "${upstream}" has tools "${clash}" and "${tool.name}" that both map to "${name}"`, {
        upstream,
        toolName: tool.name,
      });
    }
    seen.set(name, tool.name);
    return {
      name,
      upstream,
      originalName: tool.name,
      ...(tool.title === undefined ? {} : { title: tool.title }),
      ...(tool.description === undefined ? {} : { description: tool.description }),
      inputSchema: tool.inputSchema,
      ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
      ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
    };
  });
}
