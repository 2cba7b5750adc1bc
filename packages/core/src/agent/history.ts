import type { ModelMessage, ToolResultPart } from 'ai';

type ToolResultOutput = ToolResultPart['output'];

/** A tool call as it was streamed, and its result if one came. */
export interface StreamedToolCall {
  readonly toolCallId: string;
  readonly toolName: string;
  readonly input: unknown;
  output?: ToolResultOutput;
}

/**
 * Removes tool calls that have no result (a call cut off by an abort or a failed step) and results that
 * answer no call: providers refuse a conversation holding either. Tool calls the provider itself executed
 * are kept. A message left empty is dropped. The input is not changed.
 *
 * @returns the cleaned conversation and the ids of the tool calls and results that were removed.
 */
export function removeOrphanedToolCalls(messages: readonly ModelMessage[]): { messages: ModelMessage[]; removed: string[] } {
  const calls = new Set<string>();
  const results = new Set<string>();
  for (const message of messages) {
    if (typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-call' && part.providerExecuted !== true) calls.add(part.toolCallId);
      if (part.type === 'tool-result') results.add(part.toolCallId);
    }
  }
  const removed = new Set<string>();
  for (const id of calls) if (!results.has(id)) removed.add(id);
  for (const id of results) if (!calls.has(id) && !isProviderExecuted(messages, id)) removed.add(id);
  if (removed.size === 0) return { messages: [...messages], removed: [] };

  const cleaned: ModelMessage[] = [];
  for (const message of messages) {
    if (typeof message.content === 'string' || (message.role !== 'assistant' && message.role !== 'tool')) {
      cleaned.push(message);
      continue;
    }
    const content = (message.content as readonly { type: string; toolCallId?: string }[]).filter(
      (part) => !((part.type === 'tool-call' || part.type === 'tool-result') && part.toolCallId !== undefined && removed.has(part.toolCallId)),
    );
    if (content.length > 0) cleaned.push({ ...message, content } as ModelMessage);
  }
  return { messages: cleaned, removed: [...removed] };
}

function isProviderExecuted(messages: readonly ModelMessage[], toolCallId: string): boolean {
  return messages.some(
    (message) =>
      typeof message.content !== 'string' &&
      message.content.some((part) => part.type === 'tool-call' && part.toolCallId === toolCallId && part.providerExecuted === true),
  );
}

/**
 * The messages of a step that was interrupted before the SDK could give its own: the text streamed so far
 * and the tool calls made, then the results that came back. Calls without a result stay in as orphans for
 * {@link removeOrphanedToolCalls} to remove before the next model call.
 */
export function interruptedStepMessages(text: string, toolCalls: readonly StreamedToolCall[]): ModelMessage[] {
  const assistant: Extract<ModelMessage, { role: 'assistant' }>['content'] = [];
  if (text !== '') assistant.push({ type: 'text', text });
  for (const call of toolCalls) assistant.push({ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input: call.input });
  if (assistant.length === 0) return [];
  const messages: ModelMessage[] = [{ role: 'assistant', content: assistant }];
  const answered = toolCalls.filter((call) => call.output !== undefined);
  if (answered.length > 0) {
    messages.push({
      role: 'tool',
      content: answered.map((call) => ({
        type: 'tool-result' as const,
        toolCallId: call.toolCallId,
        toolName: call.toolName,
        output: call.output as ToolResultOutput,
      })),
    });
  }
  return messages;
}
