import type { CallToolResult } from '@modelcontextprotocol/client';
import { asSchema, type ToolSet } from 'ai';
import { KlymError } from '../errors.ts';
import { BUILT_IN_NAMESPACE, TOOL_NAME_SEPARATOR } from '../pool/tool-name.ts';
import { resultText } from '../tools/tool-result.ts';
import { toRecords } from '../artifacts/artifact-query.ts';
import { keepResult, type ResultKeeping } from '../artifacts/result-keeping.ts';

/** Characters of rows as JSON one `sql()` may bring into the program. */
const SQL_PAGE_CHARS = 8_000_000;

/** One upstream tool call of a program, through the run's tool set: its arguments checked, its big result kept. */
export async function callTool(
  running: { readonly tools: ToolSet; readonly keeping: ResultKeeping },
  name: string,
  args: unknown,
  toolCallId: string,
  signal: AbortSignal,
): Promise<unknown> {
  const target = name.startsWith(`${BUILT_IN_NAMESPACE}${TOOL_NAME_SEPARATOR}`) ? undefined : running.tools[name];
  if (target?.execute === undefined) {
    throw new KlymError('TOOL_NOT_FOUND', `No tool ${name} here: callTool takes an upstream tool by its name as you see it (e.g. grynya__query_graph)`);
  }
  const checked = await asSchema(target.inputSchema).validate?.(args);
  if (checked !== undefined && !checked.success) throw new KlymError('INVALID_ARGUMENT', `Invalid arguments for ${name}: ${checked.error.message}`);
  // The catalog's tools are dynamic: their input is whatever passed the check above.
  const execute = target.execute as unknown as (
    input: unknown,
    options: { toolCallId: string; messages: []; abortSignal: AbortSignal },
  ) => Promise<CallToolResult>;
  const result = await execute(args, { toolCallId, messages: [], abortSignal: signal });
  const text = (running.keeping.resultText ?? resultText)(result);
  if (result.isError === true) throw new KlymError('UPSTREAM_ERROR', `${name} answered with an error: ${text}`, { toolName: name });
  const kept = await keepResult(name, result, running.keeping);
  if (kept.artifact !== undefined) return { text: resultText(kept.result), json: null, artifact: kept.artifact.id };
  return { text, json: jsonOf(text), artifact: null };
}

/** The JSON value a tool's text is, or null. */
function jsonOf(text: string): unknown {
  const start = text.trimStart()[0];
  if (start !== '{' && start !== '[') return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A program's query: every row as an object, or a failure saying there were too many to bring in. */
export async function sql(running: { readonly keeping: ResultKeeping }, query: string, maxRows: number, signal: AbortSignal): Promise<unknown> {
  const querying = running.keeping.query;
  if (querying === undefined) throw new KlymError('QUERY_FAILED', 'This run has no SQL over its artifacts');
  const found = await querying.query(query, { pageChars: SQL_PAGE_CHARS, signal });
  running.keeping.onQueried?.({ sql: query, answer: found });
  if (!found.rowCountExact || found.rowCount > maxRows || found.rows.length < found.rowCount) {
    throw new KlymError(
      'QUERY_FAILED',
      `The query answered ${found.rowCountExact ? '' : 'more than '}${found.rowCount} rows, more than a program takes (code.maxRows is ${maxRows}, or ${SQL_PAGE_CHARS} characters): aggregate, filter, or page with LIMIT and OFFSET`,
      { limit: maxRows },
    );
  }
  return toRecords(found);
}
