// A webhook receiver as a user would run one: node:http on loopback, verifying each request with the
// `standardwebhooks` library's own `Webhook.verify`, and deduplicating by `webhook-id` as the spec asks.
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got. */
export interface ReceivedWebhook {
  readonly id: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The payload when the signature verified; `undefined` when it did not (then `invalid` says why). */
  readonly payload: { readonly type: string; readonly timestamp: string; readonly data: Record<string, unknown> } | undefined;
  readonly invalid?: string;
  /** The how-manieth request with this `webhook-id` (1 for the first). */
  readonly attempt: number;
}

/** How the receiver answers a request: a status, after an optional delay. */
export interface ReceiverAnswer {
  readonly status: number;
  readonly delayMs?: number;
}

export interface WebhookReceiver extends AsyncDisposable {
  readonly url: string;
  /** Every request, in order. */
  readonly requests: ReceivedWebhook[];
  /** The payloads it accepted (answered 2xx, signature verified), each `webhook-id` once. */
  readonly accepted: Map<string, NonNullable<ReceivedWebhook['payload']>>;
  /** How many requests carried an id that was already accepted: duplicates a receiver must drop. */
  duplicates(): number;
  close(): Promise<void>;
}

/** A fresh Standard Webhooks secret (`whsec_` and 32 random bytes in base64). */
export const webhookSecret = (): string => `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`;

/** Starts a receiver on 127.0.0.1 (a free port, or `port` to come back on the same one). `answer` decides each answer (default 204). */
export async function startWebhookReceiver(options: {
  secret: string;
  answer?: (request: ReceivedWebhook) => ReceiverAnswer;
  port?: number;
}): Promise<WebhookReceiver> {
  const verifier = new Webhook(options.secret);
  const requests: ReceivedWebhook[] = [];
  const accepted = new Map<string, NonNullable<ReceivedWebhook['payload']>>();
  const attempts = new Map<string, number>();
  let duplicates = 0;
  const server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(incoming.headers['webhook-id'] ?? '');
      let payload: ReceivedWebhook['payload'];
      let invalid: string | undefined;
      try {
        payload = verifier.verify(body, incoming.headers as Record<string, string>) as ReceivedWebhook['payload'];
      } catch (error) {
        invalid = error instanceof Error ? error.message : String(error);
      }
      const attempt = (attempts.get(id) ?? 0) + 1;
      attempts.set(id, attempt);
      const request: ReceivedWebhook = { id, headers: incoming.headers, body, payload, attempt, ...(invalid === undefined ? {} : { invalid }) };
      requests.push(request);
      const answer = payload === undefined ? { status: 401 } : (options.answer?.(request) ?? { status: 204 });
      const reply = (): void => {
        if (answer.status >= 200 && answer.status < 300 && payload !== undefined) {
          if (accepted.has(id)) duplicates++;
          else accepted.set(id, payload);
        }
        outgoing.writeHead(answer.status).end();
      };
      if (answer.delayMs === undefined) reply();
      else setTimeout(reply, answer.delayMs).unref();
    });
  });
  server.listen(options.port ?? 0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { url: `http://127.0.0.1:${port}/hooks/klym`, requests, accepted, duplicates: () => duplicates, close, [Symbol.asyncDispose]: close };
}
