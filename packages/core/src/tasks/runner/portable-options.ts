import { context, trace } from '@opentelemetry/api';
import type { RunAgentOptions } from '../../agent/types.ts';
import { KlymError } from '../../errors.ts';
import { resolveUpstreamConfig, type UpstreamConfig } from '../../pool/upstream-config.ts';
import type { AgentTracing } from '../../agent/agent-tracing.ts';
import { carrierOf } from '../../telemetry/trace-context.ts';
import type { PortableRunOptions } from './runner-messages.ts';

/**
 * The upstreams as the thread receives them: checked as the pool checks them, each `url` a string.
 * @throws {KlymError} `CONFIG_INVALID` for a `connect()` upstream, naming it, or an invalid one.
 */
export function portableUpstreams(upstreams: Readonly<Record<string, UpstreamConfig>>): Record<string, UpstreamConfig> {
  return Object.fromEntries(
    Object.entries(upstreams).map(([name, config]) => {
      if (config.connect !== undefined) {
        throw new KlymError(
          'CONFIG_INVALID',
          `Upstream "${name}": an upstream given as a \`connect()\` function cannot run on the runner thread; give it a \`url\` or a \`command\`, or run tasks inline`,
          { upstream: name },
        );
      }
      resolveUpstreamConfig(name, config);
      return [name, { ...config, ...(config.url === undefined ? {} : { url: String(config.url) }) }];
    }),
  );
}

/** How many runner threads a runner starts, and which upstream allowed no more. */
export interface ThreadCount {
  /** The threads to start: `requested`, or the smallest `pool.max` among the upstreams if that is fewer. */
  readonly count: number;
  /** The upstream whose `pool.max` allowed fewer threads than `requested` (the first such, by smallest `max`); absent when none did. */
  readonly cappedBy?: { readonly upstream: string; readonly max: number };
}

/**
 * How many runner threads to start: `requested`, but no more than the smallest `pool.max` among `upstreams`,
 * since each thread's pool needs at least one session of each upstream and `pool.max` is the runner's total
 * (a stdio upstream, `pool.max` 1 by default, allows one thread).
 */
export function threadCount(upstreams: Readonly<Record<string, UpstreamConfig>>, requested: number): ThreadCount {
  let cappedBy: { upstream: string; max: number } | undefined;
  for (const [name, config] of Object.entries(upstreams)) {
    const { max } = resolveUpstreamConfig(name, config);
    if (max < (cappedBy?.max ?? requested)) cappedBy = { upstream: name, max };
  }
  return cappedBy === undefined ? { count: requested } : { count: cappedBy.max, cappedBy };
}

/**
 * Each thread's upstreams: `upstreams` with each `pool.max` divided between `threads` pools, so that it
 * stays the runner's total — the remainder to the first threads — and `pool.min` at most the thread's
 * share. `threads` is at most each upstream's `pool.max` ({@link threadCount}), so each share is at least 1.
 */
export function threadShares(upstreams: Readonly<Record<string, UpstreamConfig>>, threads: number): Record<string, UpstreamConfig>[] {
  const limits = Object.entries(upstreams).map(([name, config]) => [name, config, resolveUpstreamConfig(name, config)] as const);
  return Array.from({ length: threads }, (_, index) =>
    Object.fromEntries(
      limits.map(([name, config, { min, max }]) => {
        const share = Math.floor(max / threads) + (index < max % threads ? 1 : 0);
        return [name, { ...config, pool: { ...config.pool, min: Math.min(min, share), max: share } }];
      }),
    ),
  );
}

/**
 * What of a run's options crosses the thread: all but the pool, scope, signals and listeners, which the
 * thread supplies (the scope by its id).
 * @throws {KlymError} `CONFIG_INVALID` for a model object, or another option that is a function.
 */
export function portableRunOptions(options: RunAgentOptions): PortableRunOptions {
  const {
    pool: _pool,
    scope,
    signal: _signal,
    budgetSignal: _budgetSignal,
    beforeStep,
    onEvent: _onEvent,
    onCheckpoint: _onCheckpoint,
    model,
    tracing,
    artifacts,
    ...rest
  } = options;
  if (model !== undefined && typeof model !== 'string') {
    throw new KlymError(
      'CONFIG_INVALID',
      `Expected \`model\` to be a model name on the runner thread, got a model object (${model.provider}:${model.modelId}); only names cross the thread`,
    );
  }
  for (const [key, value] of Object.entries(rest)) {
    if (typeof value === 'function')
      throw new KlymError('CONFIG_INVALID', `Expected \`${key}\` to be data on the runner thread, got a function; it cannot cross the thread`);
  }
  return {
    ...rest,
    ...(model === undefined ? {} : { model }),
    ...(tracing === undefined ? {} : { tracing: portableTracing(tracing) }),
    scopeId: scope?.id ?? 'run',
    ...(beforeStep === undefined ? {} : { gated: true }),
    artifacts: artifacts !== undefined,
    queries: artifacts?.query !== undefined,
  };
}

/** A run's tracing as it crosses: its parent, else the active span here, as W3C data; no tracer. */
function portableTracing({ tracer: _tracer, ...tracing }: AgentTracing): Omit<AgentTracing, 'tracer'> {
  if (tracing.parent !== undefined) return tracing;
  const active = trace.getSpanContext(context.active());
  const parent = active === undefined ? undefined : carrierOf(active);
  return parent === undefined ? tracing : { ...tracing, parent };
}
