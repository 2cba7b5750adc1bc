import { runAgent, type AgentRunner } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';

/** The question {@link asker} asks. */
export const QUESTION = 'Which service: billing or search?';

/** The real runAgent with a scripted model that asks {@link QUESTION} on its first step, then answers with what the ask's result said. */
export const asker: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: ({ options: call }) => {
        const results = call.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
        const answer = results.find((part) => part.type === 'tool-result' && part.toolName === 'klym__ask_caller');
        if (answer === undefined) return { toolCalls: [{ toolName: 'klym__ask_caller', args: { question: QUESTION } }] };
        return { text: `Looking at ${JSON.stringify(answer.type === 'tool-result' ? answer.output : null)}` };
      },
    }),
  });

/** The real runAgent with a scripted model that calls `toolName` with `args` on its first step, then answers `<said> <the call's result>` (its output, or the denial). */
function callingOnce(toolName: string, args: Record<string, unknown>, said: string): AgentRunner {
  return (options) =>
    runAgent({
      ...options,
      model: createScriptedModel({
        steps: ({ options: call }) => {
          const results = call.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
          const result = results.find((part) => part.type === 'tool-result' && part.toolName === toolName);
          if (result === undefined) return { toolCalls: [{ toolName, args }] };
          return { text: `${said} ${JSON.stringify(result.type === 'tool-result' ? result.output : null)}` };
        },
      }),
    });
}

/** Calls grynya's `query_graph` on its first step, then says what the call's result said (its rows, or the denial). */
export const querier: AgentRunner = callingOnce('grynya__query_graph', { query: 'RETURN 1' }, 'The call said');

/** Writes an Analysis into the graph on its first step (a call a test may make wait for approval), then says what the write answered. */
export const writer: AgentRunner = callingOnce(
  'grynya__add_node',
  { node_type: 'Analysis', node_data: { id: 'a_1', full_text: 'db-3 ran out of disk' }, day_id: 'd_2026_11_28', time: '2026-11-28T09:00:00Z' },
  'Wrote:',
);
