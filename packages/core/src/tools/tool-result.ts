import type { CallToolResult } from '@modelcontextprotocol/client';
import type { ToolResultPart } from 'ai';

/** What a model receives for a tool call: the AI SDK's tool result output. */
export type ToolResultOutput = ToolResultPart['output'];

type ContentItem = CallToolResult['content'][number];
type ContentOutput = Extract<ToolResultOutput, { type: 'content' }>['value'][number];

/** What introduces a result's `structuredContent` in its text. */
const STRUCTURED_PREFIX = 'structuredContent: ';

/** Longest `preview` of a result in events. */
const PREVIEW_LENGTH = 500;

/** One content item as text: text as is; images, audio and resources described by their kind, type and URI. */
function itemText(item: ContentItem): string {
  switch (item.type) {
    case 'text':
      return item.text;
    case 'image':
    case 'audio':
      return `[${item.type} ${item.mimeType}, ${Math.round((item.data.length * 3) / 4)} bytes]`;
    case 'resource_link':
      return `[resource link ${item.uri}${item.name ? ` "${item.name}"` : ''}${item.description ? `: ${item.description}` : ''}]`;
    case 'resource': {
      const resource = item.resource;
      return 'text' in resource && typeof resource.text === 'string'
        ? `[resource ${resource.uri}]\n${resource.text}`
        : `[resource ${resource.uri}${resource.mimeType ? ` ${resource.mimeType}` : ''}, binary]`;
    }
    default:
      return JSON.stringify(item);
  }
}

/**
 * A tool result as one text, the way a model reads it: every content item in order, then
 * `structuredContent` as JSON unless a text item already carries it — as the same JSON, or as a string
 * inside it (server-filesystem answers a file's text both as a text item and as `{ content: <the text> }`):
 * the same data is never sent twice.
 */
export function resultText(result: CallToolResult | string): string {
  // The AI SDK hands a built-in tool's answer (`klym__read_artifact`, …) on as it is: a string, the text itself.
  if (typeof result === 'string') return result;
  const content = result.content ?? [];
  const parts = content.map(itemText);
  const structured = result.structuredContent;
  if (structured !== undefined) {
    // Made only when compared or sent: most often a text item carries it, and a file's may be megabytes.
    let json: string | undefined;
    const jsonOf = (): string => (json ??= JSON.stringify(structured));
    const texts = content.flatMap((item) => (item.type === 'text' ? [item.text] : []));
    const alreadyThere = texts.some((text) => sameJson(text, jsonOf)) || holdsText(structured, texts);
    if (!alreadyThere) parts.push(`${STRUCTURED_PREFIX}${jsonOf()}`);
  }
  return parts.join('\n');
}

/**
 * A run's {@link resultText}: each result's text made once, however often the run asks for it (the
 * artifact check, the model's output, the event's preview, the checkpoint: four times a call). Results
 * are kept by identity, so a result must not change once asked for; one that is not an object (a
 * built-in tool answers with a string) is not kept, and its text is made each time.
 */
export function createResultTexts(): (result: CallToolResult) => string {
  const texts = new WeakMap<CallToolResult, string>();
  return (result) => {
    if (typeof result !== 'object' || result === null) return resultText(result);
    let text = texts.get(result);
    if (text === undefined) texts.set(result, (text = resultText(result)));
    return text;
  };
}

/** Whether a long string inside `value` (at most a few levels down) is one of `texts`. */
function holdsText(value: unknown, texts: readonly string[], depth = 0): boolean {
  if (typeof value === 'string') return value.length >= 64 && texts.includes(value);
  if (value === null || typeof value !== 'object' || depth > 3) return false;
  return Object.values(value).some((inner) => holdsText(inner, texts, depth + 1));
}

function sameJson(text: string, json: () => string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  return JSON.stringify(parsed) === json();
}

/**
 * What the model receives for an MCP tool result: `isError: true` becomes an error the model reads
 * (`error-text`), images and audio go as files beside the text, and anything else as text. `text` is the
 * result's {@link resultText}, when the caller has it already.
 */
export function toModelOutput(result: CallToolResult, text: string = resultText(result)): ToolResultOutput {
  if (result.isError === true) return { type: 'error-text', value: text || 'The tool reported an error without a message' };
  const media = (result.content ?? []).filter((item) => item.type === 'image' || item.type === 'audio');
  if (media.length === 0) return { type: 'text', value: text };
  const value: ContentOutput[] = [];
  for (const item of result.content ?? []) {
    if (item.type === 'image' || item.type === 'audio') {
      value.push({ type: 'file', data: { type: 'data', data: item.data }, mediaType: item.mimeType });
    } else {
      value.push({ type: 'text', text: itemText(item) });
    }
  }
  if (result.structuredContent !== undefined) value.push({ type: 'text', text: `structuredContent: ${JSON.stringify(result.structuredContent)}` });
  return { type: 'content', value };
}

/** The start of a result's text, for events: at most 500 characters, cut with `…`. */
export function previewOf(text: string): string {
  return text.length <= PREVIEW_LENGTH ? text : `${text.slice(0, PREVIEW_LENGTH - 1)}…`;
}

/**
 * Whether a result reports a failure in its own words: `isError: true`, or a JSON text with
 * `"status": "error"` (grynya-mcp-server never sets `isError`). `undefined` when it looks fine.
 */
export function failureOf(text: string, isError: boolean): string | undefined {
  if (isError) return text || 'isError';
  // The JSON is the whole text, or the `structuredContent` that {@link resultText} added after other text.
  const structured = text.lastIndexOf(STRUCTURED_PREFIX);
  const json = structured === 0 || (structured > 0 && text[structured - 1] === '\n') ? text.slice(structured + STRUCTURED_PREFIX.length) : text;
  try {
    const parsed: unknown = JSON.parse(json);
    if (parsed !== null && typeof parsed === 'object' && (parsed as { status?: unknown }).status === 'error') {
      const message = (parsed as { message?: unknown }).message;
      return typeof message === 'string' ? message : text;
    }
  } catch {
    // Not JSON: nothing more to read.
  }
  return undefined;
}
