import { describe, expect, it } from 'vitest';
import { KlymError } from '../errors.ts';
import { MAX_TOOL_NAME_LENGTH, assertUpstreamName, namespaceToolName, upstreamOfToolName } from './tool-name.ts';

const LLM_FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MCP_TOOL_NAME = /^[A-Za-z0-9._-]{1,128}$/;

describe('namespaceToolName', () => {
  it('joins upstream and tool with the separator', () => {
    expect(namespaceToolName('grynya', 'query_graph')).toBe('grynya__query_graph');
  });

  it('always yields a name valid for MCP and as an OpenAI function name', () => {
    for (const tool of ['a.b/c d', 'ünïcode', '', 'x'.repeat(200), 'tool:with:colons']) {
      const name = namespaceToolName('server-everything', tool);
      expect(name).toMatch(LLM_FUNCTION_NAME);
      expect(name).toMatch(MCP_TOOL_NAME);
    }
  });

  it('keeps distinct long names distinct', () => {
    const long = 'y'.repeat(100);
    const first = namespaceToolName('grynya', `${long}1`);
    const second = namespaceToolName('grynya', `${long}2`);
    expect(first).not.toBe(second);
    expect(first.length).toBe(MAX_TOOL_NAME_LENGTH);
  });

  it('splits back at the first separator, even when the tool name starts with underscores', () => {
    expect(upstreamOfToolName(namespaceToolName('a_b', '__private'))).toBe('a_b');
    expect(upstreamOfToolName('no-separator')).toBeUndefined();
  });
});

describe('assertUpstreamName', () => {
  it.each(['grynya', 'server-everything', 'my_memory', 'a1'])('accepts %s', (name) => {
    expect(() => assertUpstreamName(name)).not.toThrow();
  });

  it.each(['', 'a__b', 'trailing_', '_leading', 'has space', 'dot.ted', 'x'.repeat(33)])('refuses %j, naming it', (name) => {
    expect(() => assertUpstreamName(name)).toThrow(KlymError);
    expect(() => assertUpstreamName(name)).toThrow(JSON.stringify(name));
  });
});
