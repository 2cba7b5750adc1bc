import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { KlymError } from '@klym/core';
import { TRACER_NAME } from '@klym/core/server';

import { tracesExportersOf, type Env } from './tracing-env.ts';

/** Tracing the process started: the tracer Klym's spans go to, and how it was set up. */
export interface ServerTracing {
  readonly tracer: Tracer;
  /** Where spans go, without credentials: `OTLP http/protobuf to host:port`, or `the console`. */
  readonly destination: string;
  /** Exports what is buffered and stops; idempotent. */
  close(): Promise<void>;
}

/**
 * Starts OpenTelemetry tracing when the standard `OTEL_*` environment asks for it, else returns
 * `undefined` and loads nothing more: tracing is off by default. On when `OTEL_TRACES_EXPORTER` names
 * `otlp` or `console`, or, with it unset, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is
 * set; off with `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. OTLP goes over http/protobuf
 * (the spec's default) to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` +
 * `/v1/traces`, else `http://localhost:4318/v1/traces`, with `OTEL_EXPORTER_OTLP(_TRACES)_HEADERS`. The
 * resource is `service.name` `klym` unless `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` say otherwise;
 * `OTEL_TRACES_SAMPLER` (`parentbased_always_on` by default, `…traceidratio` with `OTEL_TRACES_SAMPLER_ARG`)
 * is honoured. Registers the provider, an AsyncLocalStorage context manager and the W3C propagator
 * globally (the process owns them), so that the AI SDK's spans nest in Klym's.
 *
 * @throws {KlymError} `CONFIG_INVALID` naming the variable: an exporter or protocol Klym does not ship
 * (`zipkin`, `grpc`, `http/json`), or an unknown sampler.
 */
export function startTracing(env: Env): ServerTracing | undefined {
  const exporters = tracesExportersOf(env);
  if (exporters.length === 0) return undefined;
  const spanExporters: SpanExporter[] = [];
  const destinations: string[] = [];
  for (const name of exporters) {
    if (name === 'console') {
      spanExporters.push(new ConsoleSpanExporter());
      destinations.push('the console');
      continue;
    }
    const protocol = (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? 'http/protobuf').trim();
    if (protocol !== 'http/protobuf') {
      const variable = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
      throw new KlymError('CONFIG_INVALID', `${variable}=${protocol}: Klym exports traces over OTLP http/protobuf only; unset it or set it to http/protobuf`);
    }
    const url = otlpUrlOf(env);
    spanExporters.push(new OTLPTraceExporter({ url, headers: headersOf(env) }));
    destinations.push(`OTLP http/protobuf to ${hostOf(url)}`);
  }
  const provider = new TracerProvider({
    resource: defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'klym' }))
      .merge(detectResources({ detectors: [envDetector] })),
    sampler: samplerOf(env),
    spanProcessors: spanExporters.map((exporter) => new BatchSpanProcessor({ exporter })),
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  let closing: Promise<void> | undefined;
  return {
    tracer: provider.getTracer(TRACER_NAME),
    destination: destinations.join(' and '),
    close() {
      // An exporter that cannot reach its collector must not hold the shutdown: what it could not send is lost.
      closing ??= provider.shutdown().catch(() => {});
      return closing;
    },
  };
}

function otlpUrlOf(env: Env): string {
  const traces = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim();
  if (traces) return traces;
  const base = env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim();
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : 'http://localhost:4318/v1/traces';
}

/** `k=v,k2=v2`, URL-encoded values, the traces-specific ones winning: what the OTLP spec says the variables hold. */
function headersOf(env: Env): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const raw of [env['OTEL_EXPORTER_OTLP_HEADERS'], env['OTEL_EXPORTER_OTLP_TRACES_HEADERS']]) {
    for (const pair of raw?.split(',') ?? []) {
      const at = pair.indexOf('=');
      if (at > 0) headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    }
  }
  return headers;
}

/** `host:port` of the collector: a URL may carry credentials, which are never printed. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    throw new KlymError('CONFIG_INVALID', 'OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is not a URL');
  }
}

function samplerOf(env: Env): Sampler {
  const name = (env['OTEL_TRACES_SAMPLER'] ?? 'parentbased_always_on').trim().toLowerCase();
  const ratio = Number(env['OTEL_TRACES_SAMPLER_ARG'] ?? 1);
  const fraction = Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(fraction);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(fraction) });
    default:
      throw new KlymError(
        'CONFIG_INVALID',
        `OTEL_TRACES_SAMPLER=${name}: expected always_on, always_off, traceidratio or parentbased_always_on, parentbased_always_off, parentbased_traceidratio`,
      );
  }
}
