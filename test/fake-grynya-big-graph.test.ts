import { bigGraphFacts, createFakeGrynya, eventRow, type BigGraphEvent, type FakeGrynya } from '@klym/fake-grynya';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const EVENTS = 120_000;
const SEED = 1;
const QUERY = 'MATCH (e:Event) RETURN e';

let grynya: FakeGrynya;
let client: Client;
beforeAll(async () => {
  grynya = await createFakeGrynya({ bigGraph: { events: EVENTS, seed: SEED } });
  client = new Client({ name: 'big-graph-test', version: '1' });
  await client.connect(new SSEClientTransport(new URL(grynya.sseUrl)));
});
afterAll(async () => {
  await client?.close();
  await grynya?.close();
});

async function queryText(query: string): Promise<string> {
  const result = await client.callTool({ name: 'query_graph', arguments: { query } });
  const content = result.content as { type: string; text: string }[];
  expect(result.isError).toBeUndefined();
  expect(content).toHaveLength(1);
  expect(content[0]?.type).toBe('text');
  return content[0]?.text ?? '';
}

describe('the fake grynya’s big graph over legacy HTTP+SSE', () => {
  it('answers MATCH (e:Event) RETURN e with 120,000 rows: one text item, one line of about 21 MB, matching the generator and its facts', async () => {
    // Nothing on the way limits the size: the SDK's SSEClientTransport (eventsource 3) reads an event of any
    // length, and the server's 4 MB limit is on what clients POST to it, not on what it sends.
    const text = await queryText(QUERY);

    // One line of printable ASCII (ensure_ascii escaped every non-ASCII character), about 21 MB.
    expect(text.includes('\n')).toBe(false);
    expect(/[^\u0020-\u007e]/.test(text)).toBe(false);
    expect(text).toContain(String.raw`\u`);
    // The rows as pinned in the package's tests (21,606,888 bytes) and the envelope around them.
    expect(text.length).toBe(21_606_888 + '{"status": "success", "results": }'.length);
    expect(text.startsWith('{"status": "success", "results": [{"e": {"id": "ev-000000", "label": "Event", ')).toBe(true);

    const body = JSON.parse(text) as { status: string; results: { e: BigGraphEvent }[] };
    expect(body.status).toBe('success');
    expect(body.results).toHaveLength(EVENTS);
    // Row by row against the generator: a deep equal of 120,000 rows at once is slow, and slower to report.
    const keys = ['id', 'label', 'service', 'severity', 'day', 'trace_id', 'message'] as const;
    const mismatched = body.results.flatMap((row, index) => {
      const expected = eventRow(index, SEED).e;
      const same = Object.keys(row).join() === 'e' && Object.keys(row.e).join() === keys.join() && keys.every((key) => row.e[key] === expected[key]);
      return same ? [] : [index];
    });
    expect(mismatched.slice(0, 5)).toEqual([]);

    const errorsByService: Record<string, number> = {};
    for (const { e } of body.results) if (e.severity === 'error') errorsByService[e.service] = (errorsByService[e.service] ?? 0) + 1;
    const facts = bigGraphFacts(EVENTS, SEED);
    expect(errorsByService).toEqual(facts.errorsByService);
    const last = body.results.at(-1);
    expect(facts.rowOfTrace(last?.e.trace_id ?? '')).toEqual(last);
  });

  it('answers the same text again to the keywords in any case, spread over lines', async () => {
    const first = await queryText(QUERY);
    const calls = grynya.stats.calls.query_graph ?? 0;
    expect((await queryText('match (e:Event)\n  return e;')) === first).toBe(true);
    expect(grynya.stats.calls.query_graph).toBe(calls + 1);
  });
});
