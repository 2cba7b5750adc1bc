import { describe, expect, it } from 'vitest';
import type { CatalogTool } from './tool-catalog.ts';
import { createToolDescriber, describeTools, schemaType } from './tools-prompt.ts';

const allowed = { allowed: true } as const;

describe('describeTools', () => {
  it('lists per upstream each available tool with its names, description and parameters; denied and unavailable by name', () => {
    const tools: CatalogTool[] = [
      {
        name: 'grynya__add_node',
        upstream: 'grynya',
        originalName: 'add_node',
        description: 'Merge a node.\nSets its properties.',
        readOnly: false,
        access: allowed,
        inputSchema: {
          type: 'object',
          properties: {
            node_type: { type: 'string', description: 'Label of the node' },
            node_data: { type: 'object', properties: { id: { type: 'string' } } },
            day_id: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null },
            relations: { type: 'array', items: { type: 'object' } },
          },
          required: ['node_type', 'node_data'],
        },
      },
      {
        name: 'grynya__drop',
        upstream: 'grynya',
        originalName: 'drop',
        readOnly: false,
        access: { allowed: false, policy: 'policy "read-only"', reason: 'not read-only' },
        inputSchema: { type: 'object' },
      },
    ];

    const text = describeTools({
      tools,
      upstreams: { grynya: { ok: true, toolCount: 2 }, memory: { ok: false, error: 'Upstream "memory" is unavailable: spawn ENOENT' } },
    });

    expect(text).toBe(
      [
        'Call tools by their namespaced name (upstream__tool).',
        '',
        '## grynya: 1 of 2 tools available',
        '- grynya__add_node (add_node)',
        '  Merge a node. Sets its properties.',
        '  Parameters:',
        '  - node_type: string, required — Label of the node',
        '  - node_data: object {id}, required',
        '  - day_id: string | null, optional (default null)',
        '  - relations: array of object, optional',
        'Denied for this run: grynya__drop (policy "read-only").',
        '',
        '## memory: unavailable (Upstream "memory" is unavailable: spawn ENOENT)',
        'Its tools cannot be called now.',
      ].join('\n'),
    );
  });

  it('names types in a few words', () => {
    expect(schemaType({ type: ['integer', 'null'] })).toBe('integer | null');
    expect(schemaType({ enum: ['a', 1] })).toBe('one of "a", 1');
    expect(schemaType({ const: 'x' })).toBe('exactly "x"');
    expect(schemaType({})).toBe('any');
    expect(schemaType({ type: 'array' })).toBe('array');
  });
});

/** What the tools' definitions weigh, counted the plain way. */
const json = (tools: readonly CatalogTool[]): number => JSON.stringify(tools.map((each) => [each.name, each.description, each.inputSchema])).length;

describe('createToolDescriber', () => {
  const schema: CatalogTool['inputSchema'] = { type: 'object', properties: { query: { type: 'string', description: 'Cypher' } }, required: ['query'] };
  const tool = (name: string, description?: string, callable = true): CatalogTool => ({
    name,
    upstream: 'grynya',
    originalName: name.slice('grynya__'.length),
    ...(description === undefined ? {} : { description }),
    readOnly: true,
    access: callable ? { allowed: true } : { allowed: false, policy: 'run deny list', reason: 'denied' },
    inputSchema: schema,
  });
  it('describes a catalog as describeTools does, run after run', () => {
    const describer = createToolDescriber();
    const catalogs = [
      {
        tools: [tool('grynya__query_graph', 'Run a query'), tool('grynya__drop', undefined, false)],
        upstreams: { grynya: { ok: true, toolCount: 2 } as const },
      },
      { tools: [tool('grynya__query_graph', 'Run a query', false)], upstreams: { grynya: { ok: true, toolCount: 1 } as const } },
    ];
    for (const catalog of [...catalogs, ...catalogs]) expect(describer.describe(catalog)).toBe(describeTools(catalog));
  });

  it("sizes the tools' definitions as their JSON, whatever tools share a schema", () => {
    const describer = createToolDescriber();
    const sets = [
      [],
      [tool('grynya__query_graph', 'Run a query')],
      [tool('grynya__query_graph', 'Run a query'), tool('grynya__other')],
      [tool('grynya__renamed', 'Another text')],
    ];
    for (const tools of [...sets, ...sets]) expect(describer.definitionChars(tools)).toBe(json(tools));
  });
});
