import { Webhook } from 'standardwebhooks';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import type { WebhookMessage } from './webhook-types.ts';

/** Where one attempt goes and how: a webhook endpoint, or a task's push target. */
export interface AttemptTarget {
  readonly url: string;
  /** How long the receiver may take to answer. */
  readonly timeoutMs: number;
  /** The Standard Webhooks secret to sign with; without one, the request carries its id and time but no signature. */
  readonly secret?: string;
  /** More headers (a push target's `Authorization`). @default none */
  readonly headers?: Readonly<Record<string, string>>;
  /** @default 'application/json' */
  readonly contentType?: string;
  /** The HTTP client to connect with (a push URL admitted by `*`: public addresses only). @default Node's fetch */
  readonly dispatcher?: Dispatcher;
}

/** What one attempt came to: the receiver's status (2xx is delivered), or why there was none. */
export type AttemptOutcome = { readonly ok: boolean; readonly status: number } | { readonly ok: false; readonly error: string };

/**
 * POSTs `message` to its endpoint once, signed as Standard Webhooks says (`webhook-id`, `webhook-timestamp`
 * of this attempt, `webhook-signature` v1: HMAC-SHA256 by the `standardwebhooks` library) when the target
 * has a secret, with the target's own headers besides. A redirect is not
 * followed (the endpoint's URL is the operator's choice, where it leads is not); an answer later than the
 * endpoint's `timeoutMs`, or `signal`, cuts the attempt short. Never throws: the outcome says what happened,
 * naming neither the URL nor the secret.
 */
export async function sendWebhook(endpoint: AttemptTarget, message: WebhookMessage, signal?: AbortSignal): Promise<AttemptOutcome> {
  const now = new Date();
  const timeout = AbortSignal.timeout(endpoint.timeoutMs);
  try {
    const init = {
      method: 'POST',
      redirect: 'manual',
      headers: {
        ...endpoint.headers,
        'content-type': endpoint.contentType ?? 'application/json',
        'user-agent': 'Klym-Webhooks',
        'webhook-id': message.id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        ...(endpoint.secret === undefined ? {} : { 'webhook-signature': new Webhook(endpoint.secret).sign(message.id, now, message.payload) }),
      },
      body: message.payload,
      signal: signal === undefined ? timeout : AbortSignal.any([timeout, signal]),
    } as const;
    const response =
      endpoint.dispatcher === undefined ? await fetch(endpoint.url, init) : await undiciFetch(endpoint.url, { ...init, dispatcher: endpoint.dispatcher });
    // The body is not read; cancelling it gives the connection back.
    await response.body?.cancel().catch(() => {});
    return { ok: response.status >= 200 && response.status < 300, status: response.status };
  } catch (error) {
    if (timeout.aborted) return { ok: false, error: `no answer within ${endpoint.timeoutMs} ms` };
    if (signal?.aborted) return { ok: false, error: 'Klym stopped during the attempt; its outcome is unknown' };
    return { ok: false, error: reasonOf(error) };
  }
}

/** A fetch failure in a few words: undici's cause (`connect ECONNREFUSED 127.0.0.1:9`) rather than "fetch failed". */
function reasonOf(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof Error) return `${(cause as { code?: string }).code ?? cause.name}: ${cause.message}`.replace(/^(\w+): \1 /, '$1 ');
  return error instanceof Error ? error.message : String(error);
}
