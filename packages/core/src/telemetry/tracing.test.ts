import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer as UpstreamServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAgent } from '../agent/run-agent.ts';
import { registerTaskTools } from '../mcp/register-task-tools.ts';
import { createSessionPool, type SessionPool } from '../pool/session-pool.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { createTaskService, type TaskService, type TaskServiceOptions } from '../tasks/task-service.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createMockModel, type MockStep } from '../testing/mock-model.ts';
import { createScriptedModel } from '../agent/scripted-model.ts';

// The SDK registered as an application would: spans of any tracer of the global provider land here.
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
});

/** The spans ended so far: the processor hands each to the exporter a tick later. */
async function finishedSpans(): Promise<ReadableSpan[]> {
  await provider.forceFlush();
  return exporter.getFinishedSpans();
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
  exporter.reset();
});

type Received = { tool: string; meta: Record<string, unknown> | undefined }[];

function record(received: Received, tool: string, meta: Record<string, unknown> | undefined): void {
  received.push({ tool, meta: meta === undefined ? undefined : { ...meta } });
}

/** An upstream that records the `_meta` of every call it receives. */
function recordingUpstream(received: Received) {
  return createInMemoryUpstream(() => {
    const server = new UpstreamServer({ name: 'graph', version: '1.0.0' });
    server.registerTool('query', { inputSchema: { q: z.string() }, annotations: { readOnlyHint: true } }, ({ q }, extra) => {
      record(received, 'query', extra['_meta']);
      return { content: [{ type: 'text', text: `rows for ${q}` }] };
    });
    server.registerTool('broken', { annotations: { readOnlyHint: true } }, (extra) => {
      record(received, 'broken', extra['_meta']);
      return { content: [{ type: 'text', text: 'the graph is down' }], isError: true };
    });
    return server;
  });
}

async function openPool(received: Received): Promise<SessionPool> {
  const pool = await createSessionPool({ upstreams: { graph: recordingUpstream(received) } });
  cleanups.push(() => pool.close());
  await pool.warmedUp();
  return pool;
}

/** The model's steps: a call to each tool, then an answer. */
const steps: MockStep[] = [
  {
    toolCalls: [
      { id: 'call-q', name: 'graph__query', args: { q: 'sessions' } },
      { id: 'call-b', name: 'graph__broken', args: {} },
    ],
  },
  { text: 'Two sessions.' },
];

async function serviceOver(pool: SessionPool, options: Partial<TaskServiceOptions>): Promise<{ service: TaskService; client: Client }> {
  const service = createTaskService({ pool, run: (run) => runAgent({ ...run, model: createMockModel(steps) }), shutdownGraceMs: 0, ...options });
  const server = new McpServer({ name: 'klym', version: '1.0.0' });
  registerTaskTools(server, service);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'grynya', version: '1.0.0' });
  await client.connect(clientSide);
  cleanups.push(
    () => service.close(),
    () => client.close(),
  );
  return { service, client };
}

async function startAndWait(client: Client, service: TaskService, meta?: Record<string, string>): Promise<TaskRecord> {
  const ended = new Promise<TaskRecord>((resolve) => service.onEvent((event) => event.type === 'task-end' && resolve(event.task)));
  await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'How many sessions?' }, ...(meta === undefined ? {} : { _meta: meta }) });
  return await ended;
}

const GRYNYA_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const GRYNYA_SPAN = '00f067aa0ba902b7';

/** The span named `name` (exactly one), and helpers to walk up from a span. */
function tree(spans: readonly ReadableSpan[]) {
  const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
  const named = (name: string): ReadableSpan => {
    const found = spans.filter((span) => span.name === name);
    expect(
      found.map((span) => span.name),
      `spans named ${name} among ${spans.map((span) => span.name).join(', ')}`,
    ).toEqual([name]);
    return found[0] as ReadableSpan;
  };
  const parentOf = (span: ReadableSpan): ReadableSpan | undefined => byId.get(span.parentSpanContext?.spanId ?? '');
  const ancestors = (span: ReadableSpan): string[] => {
    const names: string[] = [];
    for (let up = parentOf(span); up !== undefined; up = parentOf(up)) names.push(up.name);
    return names;
  };
  return { named, parentOf, ancestors };
}

describe('tracing a task', () => {
  it('makes the task a child of the caller’s span, with step → LLM call → tool call beneath it, and hands each call’s context upstream', async () => {
    const received: Received = [];
    const pool = await openPool(received);
    const { service, client } = await serviceOver(pool, { tracing: {} });

    const task = await startAndWait(client, service, { traceparent: `00-${GRYNYA_TRACE}-${GRYNYA_SPAN}-01`, tracestate: 'grynya=1' });
    expect(task.status).toBe('completed');

    const spans = await finishedSpans();
    const { named, parentOf, ancestors } = tree(spans);
    expect(new Set(spans.map((span) => span.spanContext().traceId))).toEqual(new Set([GRYNYA_TRACE]));

    const taskSpan = named('klym task');
    expect(taskSpan.parentSpanContext).toMatchObject({ traceId: GRYNYA_TRACE, spanId: GRYNYA_SPAN, isRemote: true });
    expect(taskSpan.attributes).toMatchObject({ 'klym.task.id': task.id, 'klym.task.status': 'completed', 'klym.task.steps': 2 });
    expect(taskSpan.spanContext().traceState?.get('grynya')).toBe('1');
    expect(parentOf(named('invoke_agent klym'))).toBe(taskSpan);
    expect(named('invoke_agent klym').attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'klym' });
    expect(ancestors(named('step 2'))).toEqual(['invoke_agent klym', 'klym task']);

    // The AI SDK's own spans of the model call, in the step.
    const chats = spans.filter((span) => span.attributes['gen_ai.operation.name'] === 'chat');
    expect(chats).toHaveLength(2);
    expect(ancestors(chats[0] as ReadableSpan)).toContain('step 1');
    expect(chats.every((chat) => chat.attributes['gen_ai.input.messages'] === undefined)).toBe(true);

    const query = named('tools/call query');
    expect(query.kind).toBe(SpanKind.CLIENT);
    expect(query.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'query',
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.call.id': 'call-q',
    });
    expect(query.attributes['error.type']).toBeUndefined();
    expect(query.status.code).not.toBe(SpanStatusCode.ERROR);
    // Under the AI SDK's tool execution, in the model call of step 1.
    expect(ancestors(query)).toEqual(expect.arrayContaining(['execute_tool graph__query', 'step 1', 'invoke_agent klym', 'klym task']));
    expect(ancestors(query).indexOf('step 1')).toBeLessThan(ancestors(query).indexOf('invoke_agent klym'));

    const broken = named('tools/call broken');
    expect(broken.attributes['error.type']).toBe('tool_error');
    expect(broken.status.code).toBe(SpanStatusCode.ERROR);

    // What the upstream received is the context of the call's own span.
    expect(received.find((call) => call.tool === 'query')?.meta).toMatchObject({
      traceparent: `00-${GRYNYA_TRACE}-${query.spanContext().spanId}-01`,
      tracestate: 'grynya=1',
    });
    expect(received.find((call) => call.tool === 'broken')?.meta).toMatchObject({ traceparent: `00-${GRYNYA_TRACE}-${broken.spanContext().spanId}-01` });
  });

  it('starts a trace of its own when the start carries no valid traceparent', async () => {
    const pool = await openPool([]);
    const { service, client } = await serviceOver(pool, { tracing: {} });
    await startAndWait(client, service, { traceparent: 'not-a-traceparent' });
    const taskSpan = tree(await finishedSpans()).named('klym task');
    expect(taskSpan.parentSpanContext).toBeUndefined();
    expect(taskSpan.spanContext().traceId).not.toBe(GRYNYA_TRACE);
  });

  it('records nothing and adds no _meta when tracing is off, whatever the request carries', async () => {
    const received: Received = [];
    const pool = await openPool(received);
    const { service, client } = await serviceOver(pool, {});
    const task = await startAndWait(client, service, { traceparent: `00-${GRYNYA_TRACE}-${GRYNYA_SPAN}-01` });
    expect(task.status).toBe('completed');
    expect(received.map((call) => call.tool)).toEqual(['query', 'broken']);
    expect(received.every((call) => call.meta?.['traceparent'] === undefined)).toBe(true);
    expect(await finishedSpans()).toEqual([]);
  });
});

describe('tracing a run', () => {
  it('traces runAgent under the active span, the scripted model’s one-call steps too, and names a failed call’s error type', async () => {
    const received: Received = [];
    const pool = await openPool(received);
    const outer = trace.getTracer('test').startSpan('outer');
    const model = createScriptedModel({
      steps: [
        {
          toolCalls: [
            { toolName: 'graph__query', args: { q: 'x' } },
            { toolName: 'graph__missing_tool', args: {} },
          ],
        },
        { text: 'done' },
      ],
    });
    const result = await context.with(trace.setSpan(context.active(), outer), () => runAgent({ pool, prompt: 'go', model, tracing: {} }));
    outer.end();
    expect(result.finishReason).toBe('stop');

    const spans = await finishedSpans();
    const { named, ancestors } = tree(spans);
    expect(ancestors(named('invoke_agent klym'))).toEqual(['outer']);
    expect(named('invoke_agent klym').attributes).toMatchObject({ 'gen_ai.response.finish_reasons': ['stop'] });
    const query = named('tools/call query');
    expect(ancestors(query)).toEqual(expect.arrayContaining(['step 1', 'invoke_agent klym', 'outer']));
    expect(received[0]?.meta?.['traceparent']).toBe(`00-${query.spanContext().traceId}-${query.spanContext().spanId}-01`);
    // A call refused before anything was sent makes no upstream call, and no span of one.
    expect(spans.some((span) => span.name === 'tools/call missing_tool')).toBe(false);
  });

  it('gives a call the pool failed the error type of its code', async () => {
    const pool = await createSessionPool({
      upstreams: {
        graph: createInMemoryUpstream(() => {
          const server = new UpstreamServer({ name: 'graph', version: '1.0.0' });
          server.registerTool(
            'hang',
            { annotations: { readOnlyHint: true } },
            (extra) => new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ content: [] }))),
          );
          return server;
        }),
      },
    });
    cleanups.push(() => pool.close());
    const model = createMockModel([{ toolCalls: [{ name: 'graph__hang', args: {} }] }, { text: 'gave up' }]);
    await runAgent({ pool, prompt: 'go', model, toolTimeoutMs: 100, tracing: {} });
    const hang = tree(await finishedSpans()).named('tools/call hang');
    expect(hang.attributes['error.type']).toBe('UPSTREAM_TIMEOUT');
    expect(hang.status).toMatchObject({ code: SpanStatusCode.ERROR, message: expect.stringContaining('hang') });
  });
});
