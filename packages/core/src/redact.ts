/** What stands in for a secret that was removed. */
export const REDACTED = '[redacted]';

/** Secrets shorter than this are not searched for: they would match ordinary text. */
const MIN_SECRET_LENGTH = 6;

/**
 * Shapes of secrets that are removed even when nobody named them: bearer tokens, `x-…-key` style header
 * values, OpenAI/Google key formats, credentials in URLs (`user:pass@`, `token@`) and token-like query parameters.
 */
const PATTERNS: readonly [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi, `$1 ${REDACTED}`],
  // An Authorization header with any scheme word before its credential (GitHub's `token <value>`, `Digest …`).
  [/\b(authorization["']?\s*[:=]\s*["']?[A-Za-z]+\s+)[^\s"',&}]{6,}/gi, `$1${REDACTED}`],
  [/\b((?:x-[a-z-]*)?(?:api[-_]?key|authorization|token|secret|password)["']?\s*[:=]\s*["']?)[^\s"',&}]{6,}/gi, `$1${REDACTED}`],
  [/\bsk-[A-Za-z0-9_-]{16,}/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED],
  [/(\b[a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, `$1${REDACTED}@`],
  [/([?&](?:key|api[-_]?key|token|access_token|auth|secret|sig|signature|password)=)[^&#\s"']+/gi, `$1${REDACTED}`],
];

/**
 * Keys remembered per redactor, with what they become. An object's keys repeat from event to event
 * (`inputTokens`, `toolCallId`, …), and some hint at a secret without holding one (`totalTokens` matches
 * `token`), which would otherwise run every pattern each time. Bounded: keys can come from a model's arguments.
 */
const KEY_CACHE_SIZE = 512;
const KEY_CACHE_MAX_LENGTH = 64;

/** Matches every string that one of {@link PATTERNS} could change (and some more). */
const HINT = /bearer|basic|key|authorization|token|secret|password|auth|sig|sk-|AIza|:\/\/[^\s/@]*@/i;

/**
 * Every secret a run or a task must keep out of what it shows: `secrets` as given, the API keys of
 * `providers`, and the secrets of the session pool's upstreams (`pool.secrets`). The one place these join the
 * list (the task service, the task manager, `runAgent` and the runner thread all take theirs from here),
 * without duplicates or empty values. `providers` and `pool` are taken by shape (`RunAgentOptions`' fit): the
 * redactor needs no more of the agent or the pool.
 */
export function secretsOf(
  secrets: readonly (string | undefined)[] = [],
  providers: { readonly [Provider in 'openai' | 'google' | 'compatible']?: { readonly apiKey?: string } } = {},
  pool: { readonly secrets?: readonly string[] } = {},
): readonly string[] {
  const all = [...secrets, providers.openai?.apiKey, providers.google?.apiKey, providers.compatible?.apiKey, ...(pool.secrets ?? [])];
  return [...new Set(all.filter((secret): secret is string => typeof secret === 'string' && secret !== ''))];
}

/** Removes secrets from text and from every string inside a value. */
export interface Redactor {
  /** `text` with every known secret and every secret-shaped token replaced by `[redacted]`. */
  text(text: string): string;
  /** A deep copy of `value` with {@link Redactor.text} applied to every string (keys included). */
  value<T>(value: T): T;
}

/**
 * A redactor for the given secret values (API keys, header values) plus the built-in secret shapes.
 * Values shorter than 6 characters are ignored. Longest secrets are replaced first, so a secret that
 * contains another is removed whole.
 */
export function createRedactor(secrets: readonly (string | undefined)[] = []): Redactor {
  const known = [...new Set(secrets.filter((secret): secret is string => typeof secret === 'string' && secret.length >= MIN_SECRET_LENGTH))].toSorted(
    (a, b) => b.length - a.length,
  );
  const text = (input: string): string => {
    if (input.length < MIN_SECRET_LENGTH) return input;
    let output = input;
    for (const secret of known) if (output.includes(secret)) output = output.split(secret).join(REDACTED);
    // Most strings hold no hint of a secret: one cheap test spares them the six replacements.
    if (!HINT.test(output)) return output;
    for (const [pattern, replacement] of PATTERNS) output = output.replace(pattern, replacement);
    return output;
  };
  const keys = new Map<string, string>();
  const key = (name: string): string => {
    if (name.length < MIN_SECRET_LENGTH) return name;
    if (name.length > KEY_CACHE_MAX_LENGTH) return text(name);
    let redacted = keys.get(name);
    if (redacted === undefined) {
      if (keys.size >= KEY_CACHE_SIZE) keys.clear();
      keys.set(name, (redacted = text(name)));
    }
    return redacted;
  };
  // What each object or array seen in this value became: shared ones stay shared, and cycles end.
  // A Map, not a WeakMap: it lives for one call, and weak maps cost the garbage collector more.
  const value = <T>(input: T, seen: Map<object, unknown>): T => {
    if (typeof input === 'string') return text(input) as T;
    if (input === null || typeof input !== 'object') return input;
    const copied = seen.get(input);
    if (copied !== undefined) return copied as T;
    if (Array.isArray(input)) {
      const copy: unknown[] = [];
      seen.set(input, copy);
      for (const item of input) copy.push(value(item, seen));
      return copy as T;
    }
    if (input instanceof Error) {
      const copy = new Error(text(input.message));
      copy.name = input.name;
      seen.set(input, copy);
      return copy as T;
    }
    if (ArrayBuffer.isView(input) || input instanceof Date || input instanceof URL) return (input instanceof URL ? new URL(text(input.href)) : input) as T;
    const copy: Record<string, unknown> = {};
    seen.set(input, copy);
    const record = input as Record<string, unknown>;
    for (const name of Object.keys(record)) {
      const redactedName = key(name);
      const redacted = value(record[name], seen);
      // A key `__proto__` (JSON.parse makes one, from a model's or a tool's JSON) stays a key: assigned, it would set the copy's prototype.
      if (redactedName === '__proto__') Object.defineProperty(copy, redactedName, { value: redacted, enumerable: true, writable: true, configurable: true });
      else copy[redactedName] = redacted;
    }
    return copy as T;
  };
  return { text, value: (input) => value(input, new Map()) };
}
