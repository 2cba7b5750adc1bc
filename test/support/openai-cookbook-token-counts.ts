// Token counts nobody at Klym wrote: the OpenAI API's own `usage.prompt_tokens` for the example requests of
// OpenAI's cookbook "How to count tokens with tiktoken", copied from
//   https://github.com/openai/openai-cookbook/blob/c81359cdc6744f001e40c08a192604c5113fdab3/examples/How_to_count_tokens_with_tiktoken.ipynb
// (file examples/How_to_count_tokens_with_tiktoken.ipynb, commit c81359cdc6744f001e40c08a192604c5113fdab3):
// section 6, "Counting tokens for chat completions API calls", and section 7, "Counting tokens for chat
// completions with tool calls". The messages, the tool and the counts are the notebook's, word for word; the
// counts are its output cells' lines "N prompt tokens counted by the OpenAI API." (Chat Completions API).

/** A Chat Completions message as the cookbook sends it: `name` is the API's optional participant name. */
export interface CookbookMessage {
  readonly role: 'system' | 'user';
  readonly content: string;
  readonly name?: string;
}

/** Section 6: a few-shot conversation, four of its system messages named `example_user` / `example_assistant`. */
export const CHAT_EXAMPLE: readonly CookbookMessage[] = [
  { role: 'system', content: 'You are a helpful, pattern-following assistant that translates corporate jargon into plain English.' },
  { role: 'system', name: 'example_user', content: 'New synergies will help drive top-line growth.' },
  { role: 'system', name: 'example_assistant', content: 'Things working well together will increase revenue.' },
  { role: 'system', name: 'example_user', content: "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage." },
  { role: 'system', name: 'example_assistant', content: "Let's talk later when we're less busy about how to do better." },
  { role: 'user', content: "This late pivot means we don't have time to boil the ocean for the client deliverable." },
];

/** Section 6's output: the prompt tokens the API reported for {@link CHAT_EXAMPLE}, by the model asked. */
export const CHAT_EXAMPLE_PROMPT_TOKENS: Readonly<Record<string, number>> = {
  'gpt-3.5-turbo': 129,
  'gpt-4-0613': 129,
  'gpt-4': 129,
  'gpt-4o': 124,
  'gpt-4o-mini': 124,
};

/** Section 7: one tool, as the `tools` of the request. */
export const TOOLS_EXAMPLE_TOOL = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather in a given location',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
        unit: { type: 'string', description: 'The unit of temperature to return', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['location'],
    },
  },
} as const;

/** Section 7: the messages sent with {@link TOOLS_EXAMPLE_TOOL}. */
export const TOOLS_EXAMPLE: readonly CookbookMessage[] = [
  { role: 'system', content: 'You are a helpful assistant that can answer to questions about the weather.' },
  { role: 'user', content: "What's the weather like in San Francisco?" },
];

/** Section 7's output: the prompt tokens the API reported for {@link TOOLS_EXAMPLE} with the tool, by the model asked. */
export const TOOLS_EXAMPLE_PROMPT_TOKENS: Readonly<Record<string, number>> = {
  'gpt-3.5-turbo': 105,
  'gpt-4': 105,
  'gpt-4o': 101,
  'gpt-4o-mini': 101,
};
