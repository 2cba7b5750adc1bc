import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createMockModel } from '../testing/mock-model.ts';
import { runAgent } from './run-agent.ts';
import type { AgentEvent } from './agent-event.ts';

/** An upstream whose one tool logs while it works, the token of a made-up service included. */
function loggingServer(): McpServer {
  const server = new McpServer({ name: 'logger', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('work', { inputSchema: { job: z.string() } }, async ({ job }, extra) => {
    await extra.sendNotification({
      method: 'notifications/message',
      params: { level: 'info', logger: 'worker', data: `starting ${job} with token tok-upstream-123456` },
    });
    return { content: [{ type: 'text', text: `${job} done` }] };
  });
  return server;
}

describe('runAgent with an in-memory upstream', () => {
  it('hands what the upstream logs during a call to onEvent, tagged with the step, with secrets removed', async () => {
    await using pool = await createSessionPool({ upstreams: { box: createInMemoryUpstream(loggingServer) } });
    const events: AgentEvent[] = [];

    const run = await runAgent({
      pool,
      prompt: 'Work',
      model: createMockModel([{ toolCalls: [{ name: 'box__work', args: { job: 'sorting' } }] }, { text: 'Sorted.' }]),
      secrets: ['tok-upstream-123456'],
      onEvent: (event) => events.push(event),
    });

    expect(run.text).toBe('Sorted.');
    expect(events).toContainEqual({
      type: 'upstream-log',
      step: 1,
      entry: { upstream: 'box', source: 'notification', level: 'info', logger: 'worker', message: 'starting sorting with token [redacted]' },
    });
  });

  it('refuses unusable options before doing anything, naming the option', async () => {
    await using pool = await createSessionPool({ upstreams: { box: createInMemoryUpstream(loggingServer) } });
    await expect(runAgent({ pool, prompt: 'x', maxRetries: -1 })).rejects.toThrow('Expected `maxRetries` to be an integer ≥ 0, got -1');
    await expect(runAgent({ pool, prompt: 'x', tools: { policy: 'careful' } })).rejects.toThrow('Unknown tool policy "careful"; known policies: "read-only"');
    await expect(runAgent({ pool, prompt: 'x', messages: [{ role: 'system', content: 'sneaky' }] })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(runAgent({ pool, prompt: 'x', model: 'openai:gpt-4.1' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });
});
