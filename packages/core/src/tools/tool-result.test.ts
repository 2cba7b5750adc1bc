import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createResultTexts, failureOf, previewOf, resultText, toModelOutput } from './tool-result.ts';

describe('tool results as the model reads them', () => {
  it('passes text as text', () => {
    expect(
      toModelOutput({
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      }),
    ).toEqual({ type: 'text', value: 'a\nb' });
  });

  it('adds structuredContent unless a text item already holds that JSON', () => {
    expect(resultText({ content: [{ type: 'text', text: 'Weather below' }], structuredContent: { temperature: 3 } })).toBe(
      'Weather below\nstructuredContent: {"temperature":3}',
    );
    expect(resultText({ content: [{ type: 'text', text: '{ "temperature": 3 }' }], structuredContent: { temperature: 3 } })).toBe('{ "temperature": 3 }');
    expect(resultText({ content: [], structuredContent: { ok: true } })).toBe('structuredContent: {"ok":true}');
  });

  it("a run's result texts are resultText's, a built-in tool's string answer included", () => {
    const texts = createResultTexts();
    const file = { content: [{ type: 'text' as const, text: 'x'.repeat(100) }], structuredContent: { content: 'x'.repeat(100) } };
    const weather = { content: [{ type: 'text' as const, text: 'Weather below' }], structuredContent: { temperature: 3 } };
    for (const result of [file, weather, file, weather]) expect(texts(result)).toBe(resultText(result));
    // The AI SDK hands a built-in tool's answer on as it is: a string, which is no key of a WeakMap.
    const answer = 'artifact art_0123456789ab, lines 0-1' as unknown as CallToolResult;
    expect(texts(answer)).toBe('artifact art_0123456789ab, lines 0-1');
    // …which is what the step's event preview and its checkpoint keep of the call, not an empty text.
    expect(toModelOutput(answer, texts(answer))).toEqual({ type: 'text', value: 'artifact art_0123456789ab, lines 0-1' });
  });

  it('makes isError a tool error the model reads', () => {
    expect(toModelOutput({ content: [{ type: 'text', text: 'no such row' }], isError: true })).toEqual({ type: 'error-text', value: 'no such row' });
    expect(toModelOutput({ content: [], isError: true })).toEqual({ type: 'error-text', value: 'The tool reported an error without a message' });
  });

  it('sends images and audio as files beside the text, and describes resources', () => {
    const output = toModelOutput({
      content: [
        { type: 'text', text: 'Here:' },
        { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://1', text: 'hello', mimeType: 'text/plain' } },
        { type: 'resource_link', uri: 'test://2', name: 'two' },
      ],
    });
    expect(output).toEqual({
      type: 'content',
      value: [
        { type: 'text', text: 'Here:' },
        { type: 'file', data: { type: 'data', data: 'iVBORw0KGgo=' }, mediaType: 'image/png' },
        { type: 'text', text: '[resource test://1]\nhello' },
        { type: 'text', text: '[resource link test://2 "two"]' },
      ],
    });
  });

  it('finds a failure in isError or in a JSON status of "error"', () => {
    expect(failureOf('{"status":"error","message":"DB disconnected"}', false)).toBe('DB disconnected');
    expect(failureOf('{"status":"success","results":[]}', false)).toBeUndefined();
    expect(failureOf('plain text', false)).toBeUndefined();
    expect(failureOf('broken', true)).toBe('broken');
    // The status may be in structuredContent, beside a text that is not that JSON.
    const result = { content: [{ type: 'text' as const, text: 'Query failed' }], structuredContent: { status: 'error', message: 'FalkorDB is not connected' } };
    expect(failureOf(resultText(result), false)).toBe('FalkorDB is not connected');
    expect(failureOf(resultText({ content: [{ type: 'text', text: 'Fine' }], structuredContent: { status: 'success' } }), false)).toBeUndefined();
  });

  it('cuts long previews', () => {
    expect(previewOf('x'.repeat(600))).toHaveLength(500);
    expect(previewOf('short')).toBe('short');
  });
});
