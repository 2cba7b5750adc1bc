// A stand-in OpenTelemetry collector for process tests: an HTTP server on a loopback port that takes OTLP
// http/protobuf trace exports (`POST /v1/traces`) and decodes the spans in them, with just enough protobuf
// (varints, length-delimited fields) to read ExportTraceServiceRequest → ResourceSpans → ScopeSpans → Span.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as the collector received it. */
export interface CollectedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** 2 is ERROR. */
  readonly statusCode: number;
  /** The `service.name` of the resource that sent it. */
  readonly service: string;
}

export interface OtlpCollector extends AsyncDisposable {
  /** The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it. */
  readonly endpoint: string;
  readonly spans: CollectedSpan[];
  /** The requests' paths and content types, in order. */
  readonly requests: { readonly path: string; readonly contentType: string }[];
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: CollectedSpan[] = [];
  const requests: { path: string; contentType: string }[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests.push({ path: request.url ?? '', contentType: request.headers['content-type'] ?? '' });
      spans.push(...decodeExport(Buffer.concat(chunks)));
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = (): Promise<void> => new Promise((resolve) => server.close(() => resolve()));
  return { endpoint: `http://127.0.0.1:${port}`, spans, requests, close, [Symbol.asyncDispose]: close };
}

type Field = { readonly number: number; readonly value: number | Buffer };

function* fields(buffer: Buffer): Generator<Field> {
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = buffer[at++] as number;
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (at < buffer.length) {
    const key = varint();
    const number = Math.floor(key / 8);
    switch (key & 7) {
      case 0:
        yield { number, value: varint() };
        break;
      case 1:
        yield { number, value: buffer.subarray(at, (at += 8)) };
        break;
      case 2: {
        const length = varint();
        yield { number, value: buffer.subarray(at, (at += length)) };
        break;
      }
      case 5:
        yield { number, value: buffer.subarray(at, (at += 4)) };
        break;
      default:
        throw new Error(`Unexpected protobuf wire type ${key & 7}`);
    }
  }
}

const messages = (buffer: Buffer, number: number): Buffer[] =>
  [...fields(buffer)].filter((field) => field.number === number && Buffer.isBuffer(field.value)).map((field) => field.value as Buffer);
const first = (buffer: Buffer, number: number): Field['value'] | undefined => [...fields(buffer)].find((field) => field.number === number)?.value;

function attributesOf(buffer: Buffer, number: number): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {};
  for (const keyValue of messages(buffer, number)) {
    const key = (first(keyValue, 1) as Buffer | undefined)?.toString('utf8') ?? '';
    const any = first(keyValue, 2);
    if (!Buffer.isBuffer(any)) continue;
    for (const value of fields(any)) {
      // AnyValue: 1 string, 2 bool, 3 int (varint), 4 double (fixed64), 5 array.
      if (value.number === 1 && Buffer.isBuffer(value.value)) attributes[key] = value.value.toString('utf8');
      else if (value.number === 2) attributes[key] = value.value === 1;
      else if (value.number === 3 && typeof value.value === 'number') attributes[key] = value.value;
      else if (value.number === 4 && Buffer.isBuffer(value.value)) attributes[key] = value.value.readDoubleLE(0);
    }
  }
  return attributes;
}

function decodeExport(body: Buffer): CollectedSpan[] {
  const spans: CollectedSpan[] = [];
  for (const resourceSpans of messages(body, 1)) {
    const resource = first(resourceSpans, 1);
    const service = Buffer.isBuffer(resource) ? String(attributesOf(resource, 1)['service.name'] ?? '') : '';
    for (const scopeSpans of messages(resourceSpans, 2)) {
      for (const span of messages(scopeSpans, 2)) {
        const hex = (number: number): string => (first(span, number) as Buffer | undefined)?.toString('hex') ?? '';
        const status = first(span, 15);
        spans.push({
          traceId: hex(1),
          spanId: hex(2),
          parentSpanId: hex(4),
          name: (first(span, 5) as Buffer | undefined)?.toString('utf8') ?? '',
          attributes: attributesOf(span, 9),
          statusCode: Buffer.isBuffer(status) ? Number(first(status, 3) ?? 0) : 0,
          service,
        });
      }
    }
  }
  return spans;
}
