import { randomBytes } from 'node:crypto';
import type { ClaimedWebhookMessage, WebhookMessage, WebhookOutbox } from './webhook-types.ts';

/** A new lease token: what a claim must show to settle its message. */
export const newLease = (): string => randomBytes(12).toString('base64url');

/**
 * The outbox of the in-memory task store: gone with the process, like its tasks. A claim checks and
 * leases within one synchronous turn, so no two claims get one message.
 */
export function createMemoryOutbox(): WebhookOutbox {
  const messages = new Map<string, WebhookMessage & { lease?: string; leaseUntil?: number }>();
  return {
    async addWebhookMessages(added) {
      for (const message of added) if (!messages.has(message.id)) messages.set(message.id, { ...message });
    },
    async claimWebhookMessages(now, leaseMs, limit) {
      const due = [...messages.values()].filter((message) => message.nextAttemptAt <= now).toSorted((a, b) => a.nextAttemptAt - b.nextAttemptAt);
      return due.slice(0, Math.max(0, limit)).map((message): ClaimedWebhookMessage => {
        const { lease: _lease, leaseUntil: _leaseUntil, ...stored } = message;
        const claimed = { ...stored, lease: newLease(), leaseUntil: now + leaseMs };
        // Leased: due again only when the lease ends unsettled.
        messages.set(message.id, { ...claimed, nextAttemptAt: claimed.leaseUntil });
        return claimed;
      });
    },
    async settleWebhookMessage(claim, settlement) {
      const stored = messages.get(claim.id);
      if (stored?.lease !== claim.lease) return false;
      if (settlement === 'done') messages.delete(claim.id);
      else messages.set(claim.id, { ...stored, attempts: settlement.attempts, nextAttemptAt: settlement.nextAttemptAt, lease: '', leaseUntil: 0 });
      return true;
    },
    async dueOfWebhookMessages(ids) {
      return new Map(
        ids.flatMap((id) => {
          const stored = messages.get(id);
          return stored === undefined ? [] : [[id, stored.nextAttemptAt] as const];
        }),
      );
    },
  };
}
