// Issue #34: the 2026-07-28 door builds its v2 SDK server once, not for every request, and takes each request's
// caller from the request itself: one server answers alice and bob in turn, each with their own tasks only.
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { scriptedRunner } from './support/mcp-tasks.ts';
import { mcp20260728Call, taskIdOf, type Mcp20260728Answer } from './support/mcp-2026-07-28.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };

let harness: ServerHarness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await harness?.cleanup();
  harness = undefined;
});

/**
 * The 2026-07-28 servers built since `registered` began watching: each lists `run_agent_task` once (the fake
 * grynya's servers, in this process too, have no such tool).
 */
const built = (registered: MockInstance<McpServer['registerTool']>): number => registered.mock.calls.filter(([name]) => name === 'run_agent_task').length;

const structured = (answer: Mcp20260728Answer): Record<string, unknown> => (answer.result as { structuredContent: Record<string, unknown> }).structuredContent;

/** Alice and bob, each with a task of their own. */
async function twoCallers(url: string) {
  const start = async (token: string) =>
    taskIdOf(await mcp20260728Call(url, token, 'tools/call', { name: 'run_agent_task', arguments: { prompt: 'steps:1' } }));
  const alice = { token: TOKENS.alice, own: await start(TOKENS.alice), other: '' };
  const bob = { token: TOKENS.bob, own: await start(TOKENS.bob), other: alice.own };
  alice.other = bob.own;
  return [alice, bob] as const;
}

describe('the 2026-07-28 door', () => {
  it('answers interleaved requests of two principals from one server built once, each seeing only its own tasks', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const registered = vi.spyOn(McpServer.prototype, 'registerTool');
    const callers = await twoCallers(url);

    // Each kind of request, alice's then bob's: the server that answered one answers the next.
    for (const { token, own } of callers) expect((await mcp20260728Call(url, token, 'tasks/get', { taskId: own })).result).toMatchObject({ taskId: own });
    for (const { token, other } of callers) {
      expect((await mcp20260728Call(url, token, 'tasks/get', { taskId: other })).error).toMatchObject({
        code: -32602,
        message: 'Failed to retrieve task: Task not found',
      });
    }
    for (const { token, other } of callers) {
      expect(structured(await mcp20260728Call(url, token, 'tools/call', { name: 'check_task_status', arguments: { task_id: other } }))).toMatchObject({
        error: { code: 'TASK_NOT_FOUND' },
      });
    }
    for (const { token, other } of callers)
      expect((await mcp20260728Call(url, token, 'tasks/cancel', { taskId: other })).error).toMatchObject({ code: -32602 });
    for (const { token, own } of callers) {
      const listed = structured(await mcp20260728Call(url, token, 'tools/call', { name: 'list_agent_tasks', arguments: {} })).tasks as { task_id: string }[];
      expect(listed.map((task) => task.task_id)).toEqual([own]);
    }
    for (let round = 0; round < 10; round++)
      expect((await mcp20260728Call(url, callers[round % 2]!.token, 'tools/list', {})).result).toMatchObject({ tools: expect.any(Array) });

    // 22 requests, one server.
    expect(built(registered)).toBe(1);
  });

  it('answers requests served at once each for its own caller, and builds no more servers once they are served', async () => {
    harness = await startHarness({ auth: { tokens: TOKENS }, tasks: { run: scriptedRunner } });
    const url = harness.server.mcpUrl;
    const registered = vi.spyOn(McpServer.prototype, 'registerTool');
    const callers = await twoCallers(url);

    const burst = Array.from({ length: 16 }, (_, index) => callers[index % 2]!);
    const answers = await Promise.all(
      burst.flatMap(({ token, own, other }) => [
        mcp20260728Call(url, token, 'tasks/get', { taskId: own }),
        mcp20260728Call(url, token, 'tasks/get', { taskId: other }),
      ]),
    );
    burst.forEach(({ own }, index) => {
      expect(answers[2 * index]?.result).toMatchObject({ taskId: own });
      expect(answers[2 * index + 1]?.error).toMatchObject({ code: -32602 });
    });
    // As many servers as requests were served at once, at most; from now on, they are reused.
    const afterBurst = built(registered);

    for (const { token, own } of [...callers, ...callers])
      expect((await mcp20260728Call(url, token, 'tasks/get', { taskId: own })).result).toMatchObject({ taskId: own });
    expect(built(registered)).toBe(afterBurst);
  });
});
