// The scripted model the code tests share: its first step writes one program (`klym__run_code`), its next says
// what the tool gave it.
import { createScriptedModel, type LanguageModelV4 } from '@klym/core/internal';

type Steps = Extract<NonNullable<Parameters<typeof createScriptedModel>[0]>['steps'], (...args: never[]) => unknown>;
/** A request's messages, as a scripted step is given them. */
export type Prompt = Parameters<Steps>[0]['options']['prompt'];

/** The last tool result the model was given, as `type: value` (a value that is not a string as JSON). */
export function lastToolResultText(prompt: Prompt): string {
  const last = prompt.at(-1);
  const part = last?.role === 'tool' ? last.content[0] : undefined;
  const output = part?.type === 'tool-result' ? (part.output as { type: string; value?: unknown }) : undefined;
  return output === undefined ? 'no result' : `${output.type}: ${typeof output.value === 'string' ? output.value : JSON.stringify(output.value)}`;
}

/**
 * A model that runs `code`, then answers with what the tool gave it; every request's messages are kept in
 * `requests` (as JSON). `subCall` answers a program's `llm`/`llmMap` requests: the text it gives, or undefined
 * for a request that is not one.
 */
export function programmer(code: string, subCall?: (prompt: Prompt) => Promise<string> | undefined): { model: LanguageModelV4; requests: string[] } {
  const requests: string[] = [];
  const model = createScriptedModel({
    steps: async ({ options }) => {
      requests.push(JSON.stringify(options.prompt));
      const answer = subCall?.(options.prompt);
      if (answer !== undefined) return { text: await answer };
      if (!options.prompt.some((message) => message.role === 'tool')) return { toolCalls: [{ toolName: 'klym__run_code', args: { code } }] };
      return { text: lastToolResultText(options.prompt) };
    },
  });
  return { model, requests };
}
