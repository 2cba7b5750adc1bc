import { describe, expect, it } from 'vitest';
import { isKlymError } from '../errors.ts';
import type { PoolTool } from '../pool/session-pool.ts';
import { assertAccessRules, isReadOnlyTool, matchesPattern, toolAccess } from './tool-policy.ts';

const tool = (upstream: string, originalName: string, readOnlyHint?: boolean): PoolTool => ({
  name: `${upstream}__${originalName}`,
  upstream,
  originalName,
  inputSchema: { type: 'object' },
  ...(readOnlyHint === undefined ? {} : { annotations: { readOnlyHint } }),
});

const query = tool('grynya', 'query_graph');
const addNode = tool('grynya', 'add_node');
const readGraph = tool('memory', 'read_graph', true);

describe('matchesPattern', () => {
  it('treats * as any run of characters and everything else literally', () => {
    expect(matchesPattern('grynya__query_graph', 'grynya__*')).toBe(true);
    expect(matchesPattern('grynya__query_graph', '*__query_*')).toBe(true);
    expect(matchesPattern('grynya__query_graph', 'grynya__query')).toBe(false);
    expect(matchesPattern('a.b', 'a?b')).toBe(false);
    expect(matchesPattern('axb', 'a.b')).toBe(false);
    expect(matchesPattern('a.b', 'a.b')).toBe(true);
    expect(matchesPattern('abc', '***')).toBe(true);
    expect(matchesPattern('', '*')).toBe(true);
    expect(matchesPattern('ab', 'a*b*')).toBe(true);
    expect(matchesPattern('aab', '*ab')).toBe(true);
    expect(matchesPattern('abab', '*ab*ab')).toBe(true);
    expect(matchesPattern('aba', '*ab')).toBe(false);
  });

  it('answers patterns built to make a RegExp backtrack without freezing (these would take minutes as `.*`s)', () => {
    const name = `grynya__${'a'.repeat(56)}`;
    expect(matchesPattern(name, `${'*a'.repeat(100)}Z`)).toBe(false);
    expect(matchesPattern(name, `${'*'.repeat(150)}a`)).toBe(true);
  });
});

describe('toolAccess', () => {
  it('allows everything without rules', () => {
    expect(toolAccess(addNode, {})).toEqual({ allowed: true });
  });

  it('read-only: only tools annotated readOnlyHint, or configured as read-only for the run or the upstream', () => {
    const readOnly = { selection: { policy: 'read-only' } };
    expect(toolAccess(readGraph, readOnly)).toEqual({ allowed: true });
    expect(toolAccess(query, readOnly)).toMatchObject({ allowed: false, policy: 'policy "read-only"', reason: expect.stringContaining('is not read-only') });
    expect(toolAccess(query, { ...readOnly, readOnlyTools: ['grynya__query_*'] })).toEqual({ allowed: true });
    expect(toolAccess(query, { ...readOnly, upstreams: { grynya: { readOnlyTools: ['query_graph'] } } })).toEqual({ allowed: true });
    expect(isReadOnlyTool(tool('x', 'y', false), {})).toBe(false);
  });

  it('checks the upstream rules first, then the run lists, then the policy, and names who denied', () => {
    const rules = {
      upstreams: { grynya: { deny: ['add_*'] } },
      selection: { deny: ['*__query_graph'], policy: 'read-only' },
    };
    expect(toolAccess(addNode, rules)).toEqual({ allowed: false, policy: 'upstream "grynya" rules', reason: '"add_node" matches the deny pattern "add_*"' });
    expect(toolAccess(query, rules)).toEqual({
      allowed: false,
      policy: 'run deny list',
      reason: '"grynya__query_graph" matches the deny pattern "*__query_graph"',
    });
    expect(toolAccess(query, { selection: { allow: ['memory__*'] } })).toMatchObject({ allowed: false, policy: 'run allow list' });
    expect(toolAccess(readGraph, { upstreams: { memory: { allow: ['search_*'] } } })).toMatchObject({ allowed: false, policy: 'upstream "memory" rules' });
  });

  it('applies named policies: allow and deny patterns, optionally read-only', () => {
    const policies = { graph: { allow: ['grynya__*'], deny: ['grynya__add_*'] } };
    expect(toolAccess(query, { policies, selection: { policy: 'graph' } })).toEqual({ allowed: true });
    expect(toolAccess(addNode, { policies, selection: { policy: 'graph' } })).toMatchObject({ allowed: false, policy: 'policy "graph"' });
    expect(toolAccess(readGraph, { policies, selection: { policy: 'graph' } })).toMatchObject({ allowed: false, policy: 'policy "graph"' });
  });
});

describe('assertAccessRules', () => {
  it('refuses an unknown policy, naming those there are', () => {
    let error: unknown;
    try {
      assertAccessRules({ policies: { graph: {} }, selection: { policy: 'readonly' } });
    } catch (thrown) {
      error = thrown;
    }
    expect(isKlymError(error, 'CONFIG_INVALID')).toBe(true);
    expect((error as Error).message).toBe('Unknown tool policy "readonly"; known policies: "read-only", "graph"');
  });

  it('refuses to redefine the built-in read-only policy', () => {
    expect(() => assertAccessRules({ policies: { 'read-only': { allow: ['*'] } } })).toThrow('Policy "read-only" is built in and cannot be redefined');
  });
});
