import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { createSessionPool, isKlymError, runAgent, type AgentEvent, type UpstreamLogEntry } from '@klym/core';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFakeLlmServer, type FakeLlmServer } from './support/fake-llm-server.ts';
import { packageFile } from './support/upstream-servers.ts';

const MARKER = `sk-klym-sentinel-${randomBytes(12).toString('hex')}`;
const ENV_KEYS = ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'GOOGLE_GENERATIVE_AI_API_KEY', 'KLYM_SENTINEL_SECRET'] as const;
const saved = new Map<string, string | undefined>();
let grynya: FakeGrynya;
let fake: FakeLlmServer;

beforeEach(async () => {
  for (const key of ENV_KEYS) saved.set(key, process.env[key]);
  // The environment holds the marker, and a base URL that leads nowhere: none of it may be used or shown.
  process.env.OPENAI_API_KEY = MARKER;
  process.env.GOOGLE_GENERATIVE_AI_API_KEY = MARKER;
  process.env.KLYM_SENTINEL_SECRET = MARKER;
  process.env.OPENAI_BASE_URL = 'http://127.0.0.1:9/v1';
  grynya = await createFakeGrynya();
});
afterEach(async () => {
  for (const [key, value] of saved) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  vi.restoreAllMocks();
  await fake?.close();
  await grynya.close();
});

/** Everything the console received while the test ran. */
function captureConsole(): string[] {
  const lines: string[] = [];
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.map((arg) => inspect(arg, { depth: 10 })).join(' ')));
  }
  return lines;
}

describe('a sentinel secret never shows', () => {
  it('in events, errors, log lines or a stdio child, through a run that fails in several ways', async () => {
    const consoleLines = captureConsole();
    fake = await startFakeLlmServer([
      {
        kind: 'turn',
        toolCalls: [
          { name: 'everything__get-env', args: {} },
          { name: 'everything__get-resource-reference', args: { resourceId: 0 } },
          { name: 'grynya__add_node', args: { node_type: 'Secret', node_data: { id: 's1' } } },
          { name: 'grynya__query_graph', args: { query: 42 } },
          { name: 'grynya__no_such_tool', args: {} },
        ],
      },
      // The provider then refuses the key and, as some do, echoes it back.
      { kind: 'fail', status: 401, body: JSON.stringify({ error: { message: `Incorrect API key provided: ${MARKER}`, type: 'invalid_request_error' } }) },
    ]);
    const logs: UpstreamLogEntry[] = [];
    await using pool = await createSessionPool({
      upstreams: {
        everything: { command: process.execPath, args: [packageFile('@modelcontextprotocol/server-everything', 'dist/index.js'), 'stdio'] },
        grynya: { url: grynya.sseUrl, transport: 'sse', headers: { Authorization: `Bearer ${MARKER}` } },
      },
      onLog: (entry) => logs.push(entry),
    });
    const events: AgentEvent[] = [];

    const error = await runAgent({
      pool,
      prompt: 'Show me everything you have',
      model: 'openai:gpt-4.1-mini',
      maxRetries: 0,
      providers: { openai: { apiKey: MARKER, baseURL: fake.openaiBaseUrl } },
      tools: { policy: 'read-only' },
      onEvent: (event) => events.push(event),
    }).catch((thrown: unknown) => thrown);

    // It did fail in every way it was asked to.
    expect(isKlymError(error, 'MODEL_ERROR')).toBe(true);
    expect((error as Error).message).toContain('Incorrect API key provided: [redacted]');
    const codes = events.flatMap((event) => (event.type === 'tool-error' ? [event.code] : event.type === 'tool-result' && event.isError ? ['isError'] : []));
    expect(codes.toSorted()).toEqual(['INVALID_TOOL_INPUT', 'NO_SUCH_TOOL', 'TOOL_DENIED', 'isError']);
    // The key from the options went to the provider, and only there; the environment's base URL was never used.
    expect(fake.requests.map((request) => request.headers.authorization)).toEqual([`Bearer ${MARKER}`, `Bearer ${MARKER}`]);
    // The stdio child ran get-env, and its environment (as the model read it) holds none of Klym's.
    const secondBody = fake.requests[1]?.body ?? '';
    expect(secondBody).toContain('PATH');
    expect(secondBody).not.toContain(MARKER);
    expect(secondBody).not.toContain('KLYM_SENTINEL_SECRET');

    const everything = [
      JSON.stringify(events),
      inspect(events, { depth: 20 }),
      (error as Error).message,
      inspect(error, { depth: 20 }),
      JSON.stringify(logs),
      ...consoleLines,
    ].join('\n');
    expect(everything).not.toContain(MARKER);
    expect(logs.length + consoleLines.length).toBeGreaterThan(0);
  });

  it('in a failure whose message would carry the URL, with credentials in it', async () => {
    const consoleLines = captureConsole();
    fake = await startFakeLlmServer([]);
    await using pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
    const events: AgentEvent[] = [];
    const base = new URL(fake.openaiBaseUrl);
    base.username = 'klym';
    base.password = MARKER;

    const error = await runAgent({
      pool,
      prompt: 'Hi',
      model: 'compatible:llama3',
      maxRetries: 0,
      providers: { compatible: { baseURL: base.href, apiKey: MARKER } },
      onEvent: (event) => events.push(event),
    }).catch((thrown: unknown) => thrown);

    expect(isKlymError(error, 'MODEL_ERROR')).toBe(true);
    expect([(error as Error).message, inspect(error, { depth: 20 }), JSON.stringify(events), ...consoleLines].join('\n')).not.toContain(MARKER);
  });
});
