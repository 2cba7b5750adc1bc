import { Webhook } from 'standardwebhooks';
import { MAX_TIMER_MS, WEBHOOK_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { WEBHOOK_EVENTS, type WebhookEndpoint, type WebhookEventType } from './webhook-types.ts';

/** An endpoint with every default applied, checked. */
export interface ResolvedWebhookEndpoint extends Required<Omit<WebhookEndpoint, 'events'>> {
  readonly name: string;
  readonly events: ReadonlySet<WebhookEventType>;
}

/** What an endpoint's name may be: as an upstream's, letters and digits joined by `-` or `_`. */
const ENDPOINT_NAME = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/;
/** `whsec_` and the base64 of the key, as Standard Webhooks writes a secret. */
const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/**
 * Checks the configured endpoints and applies their defaults.
 * @throws {KlymError} `CONFIG_INVALID` naming the endpoint and the option that is not usable (never the secret's value).
 */
export function resolveWebhookEndpoints(endpoints: Readonly<Record<string, WebhookEndpoint>> = {}): ReadonlyMap<string, ResolvedWebhookEndpoint> {
  const resolved = new Map<string, ResolvedWebhookEndpoint>();
  for (const [name, endpoint] of Object.entries(endpoints)) {
    const invalid = (option: string, expected: string, got?: unknown): KlymError =>
      new KlymError('CONFIG_INVALID', `Expected \`webhooks.${name}.${option}\` to be ${expected}${got === undefined ? '' : `, got ${JSON.stringify(got)}`}`);
    if (!ENDPOINT_NAME.test(name))
      throw new KlymError(
        'CONFIG_INVALID',
        `Expected a webhook endpoint name of letters and digits joined by "-" or "_", got ${JSON.stringify(name.slice(0, 80))}`,
      );
    if (typeof endpoint.url !== 'string' || !URL.canParse(endpoint.url) || !/^https?:$/.test(new URL(endpoint.url).protocol))
      throw invalid('url', 'an http(s) URL');
    if (!isWebhookSecret(endpoint.secret)) {
      throw invalid('secret', 'a Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes (e.g. `whsec_$(openssl rand -base64 32)`)');
    }
    const events = endpoint.events ?? WEBHOOK_DEFAULTS.events;
    for (const event of events) if (!WEBHOOK_EVENTS.includes(event)) throw invalid('events', `a list of ${WEBHOOK_EVENTS.join(', ')}`, event);
    const milliseconds = (option: 'retryForMs' | 'retryDelayMs' | 'maxRetryDelayMs' | 'timeoutMs'): number => {
      const value = endpoint[option] ?? WEBHOOK_DEFAULTS[option];
      if (!Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS)
        throw invalid(option, `a positive number of milliseconds up to ${MAX_TIMER_MS}`, value);
      return value;
    };
    resolved.set(name, {
      name,
      url: endpoint.url,
      secret: endpoint.secret,
      events: new Set(events),
      all: endpoint.all ?? false,
      retryForMs: milliseconds('retryForMs'),
      retryDelayMs: milliseconds('retryDelayMs'),
      maxRetryDelayMs: milliseconds('maxRetryDelayMs'),
      timeoutMs: milliseconds('timeoutMs'),
    });
  }
  return resolved;
}

/**
 * The endpoints that receive `event` of a task started with `webhook` (an endpoint's name, or none): the
 * one it names, and those configured with `all`, each when it takes that event.
 */
export function endpointsFor(
  endpoints: ReadonlyMap<string, ResolvedWebhookEndpoint>,
  event: WebhookEventType,
  webhook: string | undefined,
): ResolvedWebhookEndpoint[] {
  return [...endpoints.values()].filter((endpoint) => endpoint.events.has(event) && (endpoint.all || endpoint.name === webhook));
}

/** Whether `secret` is a usable Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 bytes, which the signing library takes. */
export function isWebhookSecret(secret: unknown): secret is string {
  const key = typeof secret === 'string' ? SECRET.exec(secret)?.[1] : undefined;
  const bytes = key === undefined ? 0 : Buffer.from(key, 'base64').length;
  return bytes >= 24 && bytes <= 64 && signs(secret as string);
}

/** Whether the signing library takes `secret` (its base64 decoder is stricter than Node's). */
function signs(secret: string): boolean {
  try {
    new Webhook(secret).sign('msg_check', new Date(), '');
    return true;
  } catch {
    return false;
  }
}
