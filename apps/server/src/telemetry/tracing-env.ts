import { KlymError } from '@klym/core';
import type { ServerTracing } from './start-tracing.ts';

/** The process's environment, where the `OTEL_*` variables are read. */
export type Env = Readonly<Record<string, string | undefined>>;

const EXPORTERS = new Set(['otlp', 'console', 'none']);

/**
 * The span exporters the standard environment asks for: `OTEL_TRACES_EXPORTER`'s (`otlp`, `console`), or,
 * with it unset, `otlp` when an OTLP endpoint is set; none with `OTEL_SDK_DISABLED=true` or `none`.
 * @throws {KlymError} `CONFIG_INVALID` for an exporter Klym does not ship, naming it.
 */
export function tracesExportersOf(env: Env): string[] {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return [];
  const named = env['OTEL_TRACES_EXPORTER']?.trim();
  if (named === undefined || named === '') {
    const endpoint = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'];
    return endpoint !== undefined && endpoint.trim() !== '' ? ['otlp'] : [];
  }
  const names = [...new Set(named.split(',').map((name) => name.trim().toLowerCase()))];
  for (const name of names) {
    if (!EXPORTERS.has(name))
      throw new KlymError('CONFIG_INVALID', `OTEL_TRACES_EXPORTER=${named}: Klym ships the otlp and console exporters (or none), not "${name}"`);
  }
  return names.includes('none') ? [] : names;
}

/**
 * Starts tracing when the environment asks for it (see `startTracing`); `undefined`, with no SDK loaded,
 * when it does not: tracing is off by default and costs nothing then.
 * @throws {KlymError} `CONFIG_INVALID` naming the variable that Klym cannot honour.
 */
export async function openTracing(env: Env): Promise<ServerTracing | undefined> {
  if (tracesExportersOf(env).length === 0) return undefined;
  const { startTracing } = await import('./start-tracing.ts');
  return startTracing(env);
}

/** The runner thread's setup module when tracing is on: it starts the same SDK on the thread. */
export const THREAD_TRACING_SETUP = new URL('./thread-tracing.ts', import.meta.url);
