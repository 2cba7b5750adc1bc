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

/** The real runAgent with a scripted model that calls grynya's `query_graph` on its first step, then answers with what the call's result said (its rows, or the denial). */
export const querier: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: ({ options: call }) => {
        const results = call.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
        const result = results.find((part) => part.type === 'tool-result' && part.toolName === 'grynya__query_graph');
        if (result === undefined) return { toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] };
        return { text: `The call said ${JSON.stringify(result.type === 'tool-result' ? result.output : null)}` };
      },
    }),
  });
