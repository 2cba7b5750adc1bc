import type { LanguageModelV4 } from '@klym/core/internal';

type CallOptions = Parameters<LanguageModelV4['doStream']>[0];

/** The tool results in the prompt of a model call, as the model read them, by tool call id. */
export function toolResultsIn(options: CallOptions | undefined): Map<string, { toolName: string; type: string; text: string }> {
  const results = new Map<string, { toolName: string; type: string; text: string }>();
  for (const message of options?.prompt ?? []) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type !== 'tool-result') continue;
      const output = part.output;
      const text =
        output.type === 'text' || output.type === 'error-text'
          ? output.value
          : output.type === 'content'
            ? output.value.map((item) => (item.type === 'text' ? item.text : `[${item.type} ${'mediaType' in item ? item.mediaType : ''}]`)).join('\n')
            : JSON.stringify(output);
      results.set(part.toolCallId, { toolName: part.toolName, type: output.type, text });
    }
  }
  return results;
}

/** The ids of the tool calls in the prompt of a model call (the assistant's earlier calls). */
export function toolCallIdsIn(options: CallOptions | undefined): string[] {
  return (options?.prompt ?? []).flatMap((message) =>
    message.role === 'assistant' ? message.content.flatMap((part) => (part.type === 'tool-call' ? [part.toolCallId] : [])) : [],
  );
}
