import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isKlymError } from '../errors.ts';
import { createMockModel } from '../testing/mock-model.ts';
import { resolveModel } from './model-resolver.ts';
import { createScriptedModel } from './scripted-model.ts';

const saved = { key: process.env.OPENAI_API_KEY, google: process.env.GOOGLE_GENERATIVE_AI_API_KEY };
beforeEach(() => {
  process.env.OPENAI_API_KEY = 'sk-from-the-environment-0000';
  process.env.GOOGLE_GENERATIVE_AI_API_KEY = 'from-the-environment';
});
afterEach(() => {
  for (const [name, value] of [
    ['OPENAI_API_KEY', saved.key],
    ['GOOGLE_GENERATIVE_AI_API_KEY', saved.google],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

const failure = (run: () => unknown): unknown => {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
};

describe('resolveModel', () => {
  const providers = { openai: { apiKey: 'sk-x' }, google: { apiKey: 'g-x' }, compatible: { baseURL: 'http://127.0.0.1:11434/v1' } };

  it('resolves provider:model names and matches bare names to their provider', () => {
    expect(resolveModel('openai:gpt-4.1-mini', providers).name).toBe('openai:gpt-4.1-mini');
    expect(resolveModel('gpt-4.1-mini', providers).name).toBe('openai:gpt-4.1-mini');
    expect(resolveModel('o4-mini', providers).name).toBe('openai:o4-mini');
    expect(resolveModel('gemini-2.5-flash', providers).name).toBe('google:gemini-2.5-flash');
    expect(resolveModel('google:gemini-2.5-pro', providers).model.provider).toBe('google.generative-ai');
    expect(resolveModel('llama3.1', providers).name).toBe('compatible:llama3.1');
    expect(resolveModel('compatible:qwen2.5', providers).model.provider).toBe('compatible.chat');
  });

  it("takes a bare name with a tag (Ollama's llama3.1:8b) as a bare name, not as a provider prefix", () => {
    expect(resolveModel('llama3.1:8b', providers)).toMatchObject({
      name: 'compatible:llama3.1:8b',
      model: { provider: 'compatible.chat', modelId: 'llama3.1:8b' },
    });
    expect(resolveModel('compatible:qwen2.5:7b', providers).name).toBe('compatible:qwen2.5:7b');
    expect(failure(() => resolveModel('llama3.1:8b'))).toMatchObject({
      code: 'MODEL_ERROR',
      message: expect.stringContaining('No provider matches model "llama3.1:8b"'),
    });
  });

  it('uses the Responses API by default and Chat Completions on request', () => {
    expect(resolveModel('openai:gpt-4.1', providers).model.provider).toBe('openai.responses');
    expect(resolveModel('openai:gpt-4.1', { openai: { apiKey: 'k', api: 'chat' } }).model.provider).toBe('openai.chat');
  });

  it('runs the scripted model when none is named', () => {
    expect(resolveModel(undefined).name).toBe('scripted');
    expect(resolveModel('scripted').model.provider).toBe('scripted');
  });

  it('streams real providers (a cancelled step keeps its partial text), and not the scripted model, named or given', () => {
    expect(['openai:gpt-4.1', 'google:gemini-2.5-flash', 'compatible:llama3', 'gpt-4.1-mini'].map((name) => resolveModel(name, providers).streams)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(resolveModel(undefined).streams).toBe(false);
    expect(resolveModel('scripted').streams).toBe(false);
    expect(resolveModel(createScriptedModel({ steps: [{ text: 'hi' }] })).streams).toBe(false);
    expect(resolveModel(createMockModel([{ text: 'hi' }])).streams).toBe(true);
  });

  it('never falls back to keys in the environment: a provider without configuration is refused', () => {
    const error = failure(() => resolveModel('openai:gpt-4.1-mini'));
    expect(isKlymError(error, 'CONFIG_INVALID')).toBe(true);
    expect((error as Error).message).toBe('Model "openai:gpt-4.1-mini" needs `providers.openai.apiKey`; none was given');
    expect(failure(() => resolveModel('gemini-2.5-flash', { openai: { apiKey: 'k' } }))).toMatchObject({ code: 'CONFIG_INVALID' });
    expect(failure(() => resolveModel('openai:gpt-4.1', { openai: { apiKey: '' } }))).toMatchObject({ code: 'CONFIG_INVALID' });
  });

  it('refuses a name no provider matches, and a model that is not of specification v4', () => {
    expect(failure(() => resolveModel('llama3'))).toMatchObject({
      code: 'MODEL_ERROR',
      message: expect.stringContaining('No provider matches model "llama3"'),
    });
    expect(failure(() => resolveModel('anthropic:claude'))).toMatchObject({ code: 'MODEL_ERROR' });
    const old = { specificationVersion: 'v2', provider: 'old', modelId: 'm' } as never;
    expect(failure(() => resolveModel(old))).toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringContaining('specification v4, got v2') });
  });
});
