import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import type { LanguageModel } from 'ai';
import { KlymError } from '../errors.ts';
import { streamsModel, type LanguageModelV4 } from './language-model.ts';
import { createScriptedModel } from './scripted-model.ts';
import type { ModelProviders } from './types.ts';

/** A model ready to run, its name as results and prices know it (`provider:model`), and whether to stream it. */
export interface ResolvedModel {
  readonly model: LanguageModelV4;
  readonly name: string;
  /**
   * Whether its steps stream. Real providers do: a step cut off by a cancel keeps the text streamed so far.
   * The scripted model does not: its answer is whole at once, and a stream would only cost CPU.
   */
  readonly streams: boolean;
}

/** The prefixes of `provider:model` names. */
const PROVIDERS = new Set(['openai', 'google', 'compatible', 'scripted']);
const OPENAI_BASE_URL = 'https://api.openai.com/v1';
const GOOGLE_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';

/**
 * Turns a model name into a model: `openai:<id>`, `google:<id>`, `compatible:<id>` (an OpenAI-compatible
 * endpoint such as Ollama, vLLM or LM Studio), a bare name matched to its provider (`…gemini…` → Google,
 * `gpt…`/`o1…`/`o3…`/`o4…`/`chatgpt…` → OpenAI, anything else → the compatible endpoint when one is
 * configured), or `scripted` (offline, no key; the default). An AI SDK v4 model is taken as it is.
 *
 * Keys and base URLs come only from `providers`: never from the environment (the providers would fall
 * back to `OPENAI_API_KEY`, `OPENAI_BASE_URL` and `GOOGLE_GENERATIVE_AI_API_KEY` if given `undefined`).
 *
 * @throws {KlymError} `CONFIG_INVALID` when the provider a name needs is not configured, or the model is not v4;
 * `MODEL_ERROR` when no provider matches a name.
 */
export function resolveModel(model: string | LanguageModel | undefined, providers: ModelProviders = {}): ResolvedModel {
  if (model === undefined || model === 'scripted') return scripted();
  if (typeof model !== 'string') {
    if (model.specificationVersion !== 'v4') {
      throw new KlymError(
        'CONFIG_INVALID',
        `Expected an AI SDK language model of specification v4, got ${model.specificationVersion} (${model.provider}:${model.modelId})`,
      );
    }
    return { model, name: `${model.provider.split('.')[0]}:${model.modelId}`, streams: streamsModel(model) };
  }

  const colon = model.indexOf(':');
  // Only a known provider is a prefix: a bare name may hold a colon itself (Ollama's `llama3.1:8b`).
  const prefixed = colon > 0 && PROVIDERS.has(model.slice(0, colon));
  const [provider, id] = prefixed ? [model.slice(0, colon), model.slice(colon + 1)] : [providerOf(model, providers), model];
  if (id.trim() === '') throw new KlymError('CONFIG_INVALID', `Expected a model id after "${provider}:", got ${JSON.stringify(model)}`);
  const missing = (option: string): never => {
    throw new KlymError('CONFIG_INVALID', `Model "${provider}:${id}" needs \`providers.${option}\`; none was given`);
  };
  switch (provider) {
    case 'openai': {
      const settings = providers.openai ?? missing('openai.apiKey');
      if (typeof settings.apiKey !== 'string' || settings.apiKey === '') missing('openai.apiKey');
      const openai = createOpenAI({ apiKey: settings.apiKey, baseURL: settings.baseURL ?? OPENAI_BASE_URL });
      return { model: settings.api === 'chat' ? openai.chat(id) : openai.responses(id), name: `openai:${id}`, streams: true };
    }
    case 'google': {
      const settings = providers.google ?? missing('google.apiKey');
      if (typeof settings.apiKey !== 'string' || settings.apiKey === '') missing('google.apiKey');
      const google = createGoogleGenerativeAI({ apiKey: settings.apiKey, baseURL: settings.baseURL ?? GOOGLE_BASE_URL });
      return { model: google(id), name: `google:${id}`, streams: true };
    }
    case 'compatible': {
      const settings = providers.compatible ?? missing('compatible.baseURL');
      if (typeof settings.baseURL !== 'string' || settings.baseURL === '') missing('compatible.baseURL');
      // Local servers need no key, but the provider must not go looking for one in the environment.
      const compatible = createOpenAI({ name: 'compatible', apiKey: settings.apiKey ?? 'none', baseURL: settings.baseURL });
      return { model: compatible.chat(id), name: `compatible:${id}`, streams: true };
    }
    case 'scripted':
      return scripted();
    default:
      throw new KlymError('MODEL_ERROR', `No provider matches model "${model}"; use openai:<id>, google:<id>, compatible:<id> or scripted`);
  }
}

function scripted(): ResolvedModel {
  return { model: createScriptedModel(), name: 'scripted', streams: false };
}

function providerOf(name: string, providers: ModelProviders): string {
  if (/gemini/i.test(name)) return 'google';
  if (/^(gpt|chatgpt|o[1-9])/i.test(name)) return 'openai';
  if (providers.compatible !== undefined) return 'compatible';
  throw new KlymError('MODEL_ERROR', `No provider matches model "${name}"; use openai:<id>, google:<id>, compatible:<id> or scripted`);
}
