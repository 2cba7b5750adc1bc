import { KlymError, runAgent, type AgentRunner } from '@klym/core';
import { createScriptedModel, type ScriptedStep } from '@klym/core/internal';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, type CallToolResult, type Task } from '@modelcontextprotocol/sdk/types.js';

/**
 * The real runAgent with the scripted model, its script chosen by the prompt: `steps:<n>` makes n steps
 * that each call grynya's `query_graph` once, then a last one answering `done after <n> steps`; `fail` fails with
 * `MODEL_ERROR`; anything else calls `query_graph` once and answers `done` (so `hang` hangs in the upstream
 * when the fake grynya's `hang` switch is on).
 */
export const scriptedRunner: AgentRunner = (options) => {
  if (options.prompt === 'fail') return Promise.reject(new KlymError('MODEL_ERROR', 'The scripted model was told to fail'));
  const count = /^steps:(\d+)$/.exec(options.prompt)?.[1];
  const steps = count === undefined ? 1 : Number(count);
  const answer = count === undefined ? 'done' : `done after ${steps} steps`;
  const script = ({ call }: { call: number }): ScriptedStep =>
    call <= steps
      ? { toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }], usage: { inputTokens: 100, outputTokens: 20 } }
      : { text: answer };
  return runAgent({ ...options, model: createScriptedModel({ steps: script }) });
};

/** What `callToolStream` yielded, in order. */
export interface StreamedCall {
  readonly created: Task | undefined;
  readonly statuses: readonly Task[];
  readonly result: CallToolResult | undefined;
  readonly error: Error | undefined;
}

/** Calls `name` as an MCP task through `client.experimental.tasks.callToolStream` and collects every message. */
export async function streamTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  options: Parameters<Client['experimental']['tasks']['callToolStream']>[2] = {},
): Promise<StreamedCall> {
  let created: Task | undefined;
  const statuses: Task[] = [];
  let result: CallToolResult | undefined;
  let error: Error | undefined;
  for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: {}, ...options })) {
    if (message.type === 'taskCreated') created = message.task;
    else if (message.type === 'taskStatus') statuses.push(message.task);
    else if (message.type === 'result') result = message.result as CallToolResult;
    else error = message.error;
  }
  return { created, statuses, result, error };
}

/** The text of a tool result's one text item. */
export function textOf(result: CallToolResult | undefined): string {
  const [item] = result?.content ?? [];
  if (item?.type !== 'text') throw new Error(`Expected one text item, got ${JSON.stringify(result)}`);
  return item.text;
}
