import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionPool } from '../pool/session-pool.ts';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { answerAsk, ASK_CALLER_TOOL_NAME } from './ask-caller.ts';
import { runAgent } from './run-agent.ts';
import { createScriptedModel, type ScriptedCall } from './scripted-model.ts';
import type { AgentCheckpoint } from './types.ts';

function echoServer(): McpServer {
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  server.registerTool('say', { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text: `said ${text}` }] }));
  return server;
}

/** The text of every tool result the model was given, by tool call id. */
function resultsSeen(call: ScriptedCall): Map<string, unknown> {
  const seen = new Map<string, unknown>();
  for (const message of call.options.prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.type === 'tool-result') seen.set(part.toolCallId, part.output);
  }
  return seen;
}

describe('klym__ask_caller', () => {
  it('parks the run once the step’s other calls are done, and a resume gives the model the answer as the ask’s result', async () => {
    await using pool = await createSessionPool({ upstreams: { echo: createInMemoryUpstream(echoServer) } });
    const offered: string[][] = [];
    const model = createScriptedModel({
      steps: (call) => {
        offered.push((call.options.tools ?? []).map((tool) => tool.name));
        if (call.call === 1) {
          return {
            text: 'I need to know which service.',
            toolCalls: [
              { toolCallId: 'say-1', toolName: 'echo__say', args: { text: 'hello' } },
              { toolCallId: 'ask-1', toolName: ASK_CALLER_TOOL_NAME, args: { question: 'Which service?' } },
            ],
          };
        }
        const seen = resultsSeen(call);
        return { text: `saw ${JSON.stringify(seen.get('ask-1'))} and ${JSON.stringify(seen.get('say-1'))}` };
      },
    });
    const checkpoints: AgentCheckpoint[] = [];
    const first = await runAgent({ pool, prompt: 'Check the errors', model, askCaller: true, onCheckpoint: (saved) => void checkpoints.push(saved) });

    expect(first.finishReason).toBe('input-required');
    expect(first.asked).toEqual({ toolCallId: 'ask-1', question: 'Which service?' });
    expect(offered[0]).toContain(ASK_CALLER_TOOL_NAME);
    const parked = checkpoints.at(-1) as AgentCheckpoint;
    expect(parked.steps).toBe(1);
    expect(parked.current?.calls).toEqual([
      expect.objectContaining({ toolCallId: 'say-1', output: expect.objectContaining({ type: 'text' }) }),
      { toolCallId: 'ask-1', toolName: ASK_CALLER_TOOL_NAME, input: { question: 'Which service?' } },
    ]);

    const second = await runAgent({
      pool,
      prompt: 'Check the errors',
      model,
      askCaller: true,
      resume: answerAsk(parked, 'ask-1', { answer: 'the billing service' }),
    });
    expect(second.finishReason).toBe('stop');
    expect(second.finalText).toContain('"value":"the billing service"');
    expect(second.finalText).toContain('said hello');
    expect(second.steps).toBe(2);
  });

  it('is not offered without askCaller', async () => {
    await using pool = await createSessionPool({ upstreams: { echo: createInMemoryUpstream(echoServer) } });
    let tools: string[] = [];
    const model = createScriptedModel({
      steps: (call) => {
        tools = (call.options.tools ?? []).map((tool) => tool.name);
        return { text: 'done' };
      },
    });
    await runAgent({ pool, prompt: 'x', model });
    expect(tools).toContain('echo__say');
    expect(tools).not.toContain(ASK_CALLER_TOOL_NAME);
  });
});
