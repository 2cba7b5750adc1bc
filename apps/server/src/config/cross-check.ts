/**
 * The checks between configuration keys that no one key's schema can see (a default above its maximum, a
 * model without its provider's key, an admin who is no principal, …), run on the parsed configuration.
 */
import { isLoopback } from '../server/server-options.ts';
import type { ParsedConfig } from './schema.ts';

/** Which provider serves a model name, as core matches it (`openai:…`, a bare `gpt-…`, `google:…`, `gemini-…`, `compatible:…`). */
export function providerOf(model: string): 'openai' | 'google' | 'compatible' | undefined {
  const prefix = model.includes(':') ? model.slice(0, model.indexOf(':')) : undefined;
  if (prefix === 'openai' || prefix === 'google' || prefix === 'compatible') return prefix;
  if (prefix === undefined && /^(gpt|o\d|chatgpt)/i.test(model)) return 'openai';
  if (prefix === undefined && /^gemini/i.test(model)) return 'google';
  return undefined;
}

/** The budget keys, in the order they are checked. */
export const BUDGET_KEYS = ['maxSteps', 'maxTokens', 'maxCostUsd', 'timeoutMs'] as const;

/** Checks between keys that one key's schema cannot see. Paths are reported like zod's. */
export function crossCheck(config: ParsedConfig): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  for (const key of BUDGET_KEYS) {
    const value = config.budget.default[key];
    const max = config.budget.max[key];
    if (value !== undefined && max !== undefined && value > max)
      issues.push({ path: ['budget', 'default', key], message: `expected at most \`budget.max.${key}\` (${max})` });
  }
  for (const name of Object.keys(config.mcpServers)) {
    if (name in config.upstreams) issues.push({ path: ['mcpServers', name], message: `an upstream named "${name}" is also in \`upstreams\`` });
  }
  if (config.tasks.concurrency === 0 && !/^rediss?:\/\//.test(config.tasks.store)) {
    issues.push({
      path: ['tasks', 'concurrency'],
      message: 'expected at least 1: only with a Redis `tasks.store` can a process run no tasks (its workers run them)',
    });
  }
  const policy = config.tools.policy;
  if (policy !== undefined && policy !== 'read-only' && !(policy in config.policies)) {
    issues.push({
      path: ['tools', 'policy'],
      message: `expected \`read-only\` or a policy from \`policies\` (${Object.keys(config.policies).join(', ') || 'none'})`,
    });
  }
  const models: [(string | number)[], string][] = [
    [['llm', 'model'], config.llm.model],
    ...config.llm.models.map((model, index): [(string | number)[], string] => [['llm', 'models', index], model]),
    ...(config.llm.mapModel === undefined ? [] : [[['llm', 'mapModel'], config.llm.mapModel] as [(string | number)[], string]]),
  ];
  for (const [path, model] of models) {
    const provider = providerOf(model);
    const own = providerOf(config.llm.model) === provider;
    const settings = provider === undefined ? undefined : config.llm.providers[provider];
    if (provider === 'compatible' && settings?.baseURL === undefined && !(own && config.llm.baseURL !== undefined)) {
      issues.push({ path, message: 'a `compatible:` model needs a base URL: set `llm.baseURL` or `llm.providers.compatible.baseURL`' });
    } else if ((provider === 'openai' || provider === 'google') && settings?.apiKey === undefined && !(own && config.llm.apiKey !== undefined)) {
      const variable = provider === 'openai' ? 'OPENAI_API_KEY' : 'GOOGLE_GENERATIVE_AI_API_KEY';
      issues.push({ path, message: `needs an API key for the ${provider} provider: set ${variable}, \`llm.apiKey\` or \`llm.providers.${provider}.apiKey\`` });
    }
  }
  config.server.admins.forEach((admin, index) => {
    if (!Object.hasOwn(config.server.tokens, admin))
      issues.push({
        path: ['server', 'admins', index],
        message: `expected a principal of \`server.tokens\` (${Object.keys(config.server.tokens).join(', ') || 'none'})`,
      });
  });
  const { oauth, host, port } = config.server;
  if (!isLoopback(host) && Object.keys(config.server.tokens).length === 0 && oauth === undefined) {
    issues.push({ path: ['server', 'host'], message: `binding "${host}" (not loopback) needs \`server.tokens\` or \`server.oauth\`` });
  }
  for (const [value, principal] of Object.entries(oauth?.principals ?? {})) {
    if (!Object.hasOwn(config.server.tokens, principal)) {
      issues.push({
        path: ['server', 'oauth', 'principals', value],
        message: `expected a principal of \`server.tokens\` (${Object.keys(config.server.tokens).join(', ') || 'none'})`,
      });
    }
  }
  if (oauth !== undefined && oauth.resource === undefined && (port === 0 || ['0.0.0.0', '::', '[::]'].includes(host))) {
    issues.push({
      path: ['server', 'oauth', 'resource'],
      message: `required when the server listens on ${port === 0 ? 'a free port (0)' : `"${host}"`}: the URL clients reach Klym's /mcp at, which tokens are bound to`,
    });
  }
  return issues;
}
