import type { CatalogTool, ToolCatalog } from './tool-catalog.ts';

type JsonSchemaLike = { readonly [key: string]: unknown };

/** A schema's type in a few words: `string`, `array of integer`, `one of "a", "b"`, `string | null`. */
export function schemaType(schema: unknown): string {
  if (schema === null || typeof schema !== 'object') return 'any';
  const node = schema as JsonSchemaLike;
  if (Array.isArray(node.enum)) return `one of ${node.enum.map((value) => JSON.stringify(value)).join(', ')}`;
  if ('const' in node) return `exactly ${JSON.stringify(node.const)}`;
  const alternatives = (node.anyOf ?? node.oneOf) as unknown;
  if (Array.isArray(alternatives)) return alternatives.map(schemaType).join(' | ');
  const type = node.type;
  if (Array.isArray(type)) return type.map((each) => schemaType({ ...node, type: each })).join(' | ');
  if (type === 'array') return node.items === undefined ? 'array' : `array of ${schemaType(node.items)}`;
  if (type === 'object') {
    const properties = node.properties as Record<string, unknown> | undefined;
    const names = properties === undefined ? [] : Object.keys(properties);
    return names.length === 0 ? 'object' : `object {${names.join(', ')}}`;
  }
  return typeof type === 'string' ? type : 'any';
}

function describeParameters(tool: CatalogTool): readonly string[] {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, JsonSchemaLike>;
  const required = new Set(tool.inputSchema.required ?? []);
  const names = Object.keys(properties);
  if (names.length === 0) return ['  Parameters: none'];
  return [
    '  Parameters:',
    ...names.map((name) => {
      const schema = properties[name] ?? {};
      const description = typeof schema.description === 'string' ? ` — ${oneLine(schema.description)}` : '';
      const fallback = 'default' in schema ? ` (default ${JSON.stringify(schema.default)})` : '';
      return `  - ${name}: ${schemaType(schema)}, ${required.has(name) ? 'required' : 'optional'}${fallback}${description}`;
    }),
  ];
}

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ').trim();

/**
 * The tools of a catalog as text for a system prompt, because some models read a prompt better than a
 * schema: per upstream, each tool the run may call with its namespaced name, original name, description
 * and parameters (type, required or optional); then the tools a policy denies, and the upstreams that are
 * unavailable, by name — nothing is silently left out.
 */
export function describeTools(catalog: Pick<ToolCatalog, 'tools' | 'upstreams'>): string {
  return describe(catalog, describeParameters);
}

/** {@link describeTools}, and the size of the tools' definitions, each tool's worked out once. */
export interface ToolDescriber {
  describe(catalog: Pick<ToolCatalog, 'tools' | 'upstreams'>): string;
  /** `JSON.stringify(tools.map((tool) => [tool.name, tool.description, tool.inputSchema])).length`. */
  definitionChars(tools: readonly CatalogTool[]): number;
}

/**
 * A describer that remembers each tool's parameter lines and definition size by its input schema object:
 * a pool serves every run the same listing (its schema objects included), and working them out again
 * for each run costs more than the rest of a run's catalog. A schema is never changed once listed.
 */
export function createToolDescriber(): ToolDescriber {
  const parameters = new WeakMap<object, readonly string[]>();
  const definitions = new WeakMap<object, { readonly name: string; readonly description: string | undefined; readonly chars: number }>();
  const parametersOf = (tool: CatalogTool): readonly string[] => {
    let lines = parameters.get(tool.inputSchema);
    if (lines === undefined) parameters.set(tool.inputSchema, (lines = describeParameters(tool)));
    return lines;
  };
  return {
    describe: (catalog) => describe(catalog, parametersOf),
    definitionChars(tools) {
      // `[`, `]` and the commas between the tools.
      let chars = tools.length === 0 ? 2 : tools.length + 1;
      for (const tool of tools) {
        let known = definitions.get(tool.inputSchema);
        if (known === undefined || known.name !== tool.name || known.description !== tool.description) {
          known = { name: tool.name, description: tool.description, chars: JSON.stringify([tool.name, tool.description, tool.inputSchema]).length };
          definitions.set(tool.inputSchema, known);
        }
        chars += known.chars;
      }
      return chars;
    },
  };
}

function describe(catalog: Pick<ToolCatalog, 'tools' | 'upstreams'>, parametersOf: (tool: CatalogTool) => readonly string[]): string {
  const lines: string[] = ['Call tools by their namespaced name (upstream__tool).'];
  for (const [upstream, report] of Object.entries(catalog.upstreams)) {
    lines.push('');
    if (!report.ok) {
      lines.push(`## ${upstream}: unavailable (${oneLine(report.error)})`, 'Its tools cannot be called now.');
      continue;
    }
    const own = catalog.tools.filter((tool) => tool.upstream === upstream);
    const allowed = own.filter((tool) => tool.access.allowed);
    lines.push(`## ${upstream}: ${allowed.length} of ${own.length} tools available`);
    for (const tool of allowed) {
      const approval = tool.approval === undefined ? '' : ' [each call waits for the caller’s approval]';
      lines.push(`- ${tool.name} (${tool.originalName})${tool.readOnly ? ' [read-only]' : ''}${approval}`);
      const description = tool.description ?? tool.title;
      if (description !== undefined && description.trim() !== '') lines.push(`  ${oneLine(description)}`);
      for (const line of parametersOf(tool)) lines.push(line);
    }
    const denied = own.flatMap((tool) => (tool.access.allowed ? [] : [`${tool.name} (${tool.access.policy})`]));
    if (denied.length > 0) lines.push(`Denied for this run: ${denied.join(', ')}.`);
  }
  return lines.join('\n');
}
