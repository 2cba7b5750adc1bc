import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedRunner, streamTool } from './support/mcp-tasks.ts';
import { payload, startHarness, type ServerHarness } from './support/server-harness.ts';

// Issue #26: a start's arguments are checked once, with the same strict schema on every way in. Before,
// `start_async_agent_task` over MCP dropped a misspelled `idempotencyKey` and started a task without its key.
const MISSPELLED = { prompt: 'steps:0', idempotencyKey: 'k-1' };
const NESTED = { prompt: 'steps:0', budget: { max_step: 3 } };

let harness: ServerHarness;
beforeAll(async () => {
  harness = await startHarness({ tasks: { run: scriptedRunner } });
});
afterAll(() => harness.cleanup());

/** The text of a tool's `isError` answer. */
function refusalText(result: unknown): string {
  const { isError, content } = result as CallToolResult;
  expect(isError).toBe(true);
  return content.map((item) => (item.type === 'text' ? item.text : '')).join('\n');
}

/** `POST /api/tasks` with `body` as JSON. */
const post = (body: object): Promise<Response> =>
  fetch(`${harness.server.url}/api/tasks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** How many tasks the anonymous principal has, as `list_agent_tasks` counts them. */
async function taskCount(): Promise<number> {
  const client = await harness.connect('streamable-http');
  return Number(payload(await client.callTool({ name: 'list_agent_tasks', arguments: {} })).total);
}

describe('arguments checked once, alike on every way in', () => {
  for (const kind of ['streamable-http', 'sse'] as const) {
    it(`over MCP (${kind}), refuses an unknown argument to each task tool by name and starts nothing`, async () => {
      const client = await harness.connect(kind);
      const before = await taskCount();
      expect(refusalText(await client.callTool({ name: 'start_async_agent_task', arguments: MISSPELLED }))).toMatch(/Unrecognized key: "idempotencyKey"/);
      expect(refusalText(await client.callTool({ name: 'start_async_agent_task', arguments: NESTED }))).toMatch(/budget: Unrecognized key: "max_step"/);
      expect(refusalText(await client.callTool({ name: 'check_task_status', arguments: { task_id: 'x', fullResult: true } }))).toMatch(/"fullResult"/);
      expect(refusalText(await client.callTool({ name: 'list_agent_tasks', arguments: { state: 'running' } }))).toMatch(/"state"/);
      expect(refusalText(await client.callTool({ name: 'cancel_agent_task', arguments: { taskId: 'x' } }))).toMatch(/"taskId"/);
      expect(refusalText(await client.callTool({ name: 'describe_capabilities', arguments: { verbose: true } }))).toMatch(/"verbose"/);
      expect(await taskCount()).toBe(before);
    });

    it(`on the MCP tasks path (${kind}), answers -32602 naming the unknown argument and starts nothing`, async () => {
      const client = await harness.connect(kind);
      const before = await taskCount();
      for (const [args, named] of [
        [MISSPELLED, /Unrecognized key: "idempotencyKey"/],
        [NESTED, /budget: Unrecognized key: "max_step"/],
      ] as const) {
        const streamed = await streamTool(client, 'run_agent_task', args);
        expect(streamed.created).toBeUndefined();
        expect(streamed.error).toBeInstanceOf(McpError);
        expect((streamed.error as McpError).code).toBe(-32602);
        expect(streamed.error?.message).toMatch(named);
      }
      expect(await taskCount()).toBe(before);
    });
  }

  it('over REST, answers 400 naming the unknown argument and starts nothing', async () => {
    const before = await taskCount();
    for (const [body, named] of [
      [MISSPELLED, /^`idempotencyKey`/],
      [NESTED, /^`budget`: Unrecognized key: "max_step"/],
    ] as const) {
      const refused = await post(body);
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(named) } });
    }
    expect(await taskCount()).toBe(before);
  });

  it('still starts a task whose arguments are all known, and a retry with its key answers that task', async () => {
    const client = await harness.connect('sse');
    const before = await taskCount();
    const args = { prompt: 'steps:0', idempotency_key: 'k-1' };
    const first = payload(await client.callTool({ name: 'start_async_agent_task', arguments: args }));
    const again = payload(await client.callTool({ name: 'start_async_agent_task', arguments: args }));
    expect(again.task_id).toBe(first.task_id);
    expect(await taskCount()).toBe(before + 1);
  });
});
