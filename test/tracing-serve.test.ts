// Traces of a real `klym serve` (its runs on the runner thread, the CLI's default) sent over OTLP to a
// stand-in collector, with the fake grynya as the upstream that records the `_meta` of every call.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKlym, startKlym, temporaryDirectory } from './cli-harness.ts';
import { startOtlpCollector, type CollectedSpan, type OtlpCollector } from './support/otlp-collector.ts';

const GRYNYA_TRACE = '0af7651916cd43dd8448eb211c80319c';
const GRYNYA_SPAN = 'b7ad6b7169203331';

let grynya: FakeGrynya;
let collector: OtlpCollector;
const cwd = temporaryDirectory();
beforeAll(async () => {
  grynya = await createFakeGrynya();
  collector = await startOtlpCollector();
  writeFileSync(path.join(cwd.path, 'klym.config.yaml'), `upstreams:\n  grynya:\n    url: ${grynya.sseUrl}\n    transport: sse\n`);
});
afterAll(async () => {
  await grynya?.close();
  await collector?.close();
  cwd[Symbol.dispose]();
});

const payload = (result: Awaited<ReturnType<Client['callTool']>>): Record<string, unknown> => result.structuredContent as Record<string, unknown>;

/** Serves with `env`, runs one task (the scripted model's self-check calls grynya) started with Grynya's trace context, and stops. */
async function serveOneTask(env: Record<string, string>): Promise<{ stderr: string; taskId: string }> {
  const klym = startKlym(['serve', '--port', '0'], { cwd: cwd.path, env });
  let taskId = '';
  try {
    const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/)) as [string, string];
    const client = new Client({ name: 'grynya', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
    const started = await client.callTool({
      name: 'start_async_agent_task',
      arguments: { prompt: 'Check yourself' },
      _meta: { traceparent: `00-${GRYNYA_TRACE}-${GRYNYA_SPAN}-01` },
    });
    taskId = String(payload(started)['task_id']);
    await expect
      .poll(async () => payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))['status'], { timeout: 20_000 })
      .toBe('completed');
    await client.close();
  } finally {
    klym.child.kill('SIGTERM');
  }
  const { code, stderr } = await klym.exited();
  expect(code).toBe(0);
  return { stderr, taskId };
}

function parentOf(spans: readonly CollectedSpan[], span: CollectedSpan): CollectedSpan | undefined {
  return spans.find((candidate) => candidate.spanId === span.parentSpanId && candidate.traceId === span.traceId);
}

function ancestors(spans: readonly CollectedSpan[], span: CollectedSpan): string[] {
  const names: string[] = [];
  for (let up = parentOf(spans, span); up !== undefined; up = parentOf(spans, up)) names.push(up.name);
  return names;
}

describe('klym serve with OTEL_* set', () => {
  it('exports the task as a child of Grynya’s span, its runner-thread spans beneath, and sends each call’s own context to grynya', async () => {
    const calls = grynya.stats.callMeta.length;
    const { stderr, taskId } = await serveOneTask({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_SERVICE_NAME: 'klym-test' });
    expect(stderr).toContain(`klym: tracing on: spans go to OTLP http/protobuf to ${new URL(collector.endpoint).host}`);
    expect(collector.requests.every((request) => request.path === '/v1/traces' && request.contentType === 'application/x-protobuf')).toBe(true);

    const spans = collector.spans.filter((span) => span.traceId === GRYNYA_TRACE);
    const taskSpan = spans.find((span) => span.name === 'klym task' && span.attributes['klym.task.id'] === taskId);
    expect(taskSpan).toMatchObject({ parentSpanId: GRYNYA_SPAN, service: 'klym-test', attributes: { 'klym.task.status': 'completed' } });
    const run = spans.find((span) => span.name === 'invoke_agent klym');
    expect(run?.parentSpanId).toBe(taskSpan?.spanId);

    // The self-check's probe, made on the runner thread: its span, and the context grynya received.
    const query = spans.find((span) => span.name === 'tools/call query_graph');
    expect(query?.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'query_graph', 'gen_ai.operation.name': 'execute_tool' });
    expect(ancestors(spans, query as CollectedSpan)).toEqual(expect.arrayContaining(['step 1', 'invoke_agent klym', 'klym task']));
    expect(spans.some((span) => span.attributes['gen_ai.operation.name'] === 'chat')).toBe(true);
    const received = grynya.stats.callMeta.slice(calls).filter((call) => call.tool === 'query_graph');
    expect(received.map((call) => call.meta?.['traceparent'])).toEqual([`00-${GRYNYA_TRACE}-${query?.spanId}-01`]);
  });

  it('stops at start-up on an exporter it does not ship, naming the variable', async () => {
    const { code, stdout, stderr } = await runKlym(['serve', '--port', '0'], { cwd: cwd.path, env: { OTEL_TRACES_EXPORTER: 'zipkin' } });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe('klym: OTEL_TRACES_EXPORTER=zipkin: Klym ships the otlp and console exporters (or none), not "zipkin"\n');
  });
});

describe('klym serve without OTEL_*', () => {
  it('exports nothing and adds no trace context to grynya’s calls', async () => {
    const exports = collector.requests.length;
    const calls = grynya.stats.callMeta.length;
    const { stderr } = await serveOneTask({});
    expect(stderr).not.toContain('tracing on');
    expect(collector.requests.length).toBe(exports);
    const received = grynya.stats.callMeta.slice(calls);
    expect(received.map((call) => call.tool)).toContain('query_graph');
    expect(received.every((call) => call.meta?.['traceparent'] === undefined)).toBe(true);
  });
});
