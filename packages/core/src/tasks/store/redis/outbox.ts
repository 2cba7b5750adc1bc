import { newLease } from '../../../webhooks/memory-outbox.ts';
import type { ClaimedWebhookMessage, OutboxEventType, WebhookOutbox } from '../../../webhooks/webhook-types.ts';
import type { RedisScripts, ScriptReply } from './scripts.ts';

/**
 * The Redis store's webhook outbox (scripts in outbox-scripts.ts): shared by every process on the store,
 * each message claimed by one of them at a time.
 */
export function createRedisOutbox(scripts: RedisScripts, prefix: string): WebhookOutbox {
  const due = `${prefix}webhooks:due`;
  const messageKey = (id: string): string => `${prefix}webhook:${id}`;
  return {
    async addWebhookMessages(messages) {
      await Promise.all(
        messages.map((message) =>
          scripts.klymOutboxAdd(
            messageKey(message.id),
            due,
            message.id,
            message.nextAttemptAt,
            'taskId',
            message.taskId,
            'endpoint',
            message.endpoint,
            'type',
            message.type,
            'payload',
            message.payload,
            'createdAt',
            message.createdAt,
            'attempts',
            message.attempts,
            'nextAttemptAt',
            message.nextAttemptAt,
            'lease',
            '',
          ),
        ),
      );
    },
    async claimWebhookMessages(now, leaseMs, limit) {
      if (limit < 1) return [];
      const leaseUntil = now + leaseMs;
      const leases = Array.from({ length: limit }, newLease);
      const reply = await scripts.klymOutboxClaim(due, prefix, now, leaseUntil, limit, ...leases);
      return (Array.isArray(reply) ? reply : []).map((fields) => claimedOf(fields, leaseUntil));
    },
    async settleWebhookMessage(claim, settlement) {
      const outcome = settlement === 'done' ? ['done'] : [settlement.attempts, settlement.nextAttemptAt];
      return (await scripts.klymOutboxSettle(messageKey(claim.id), due, claim.id, claim.lease, ...outcome)) === 1;
    },
    async dueOfWebhookMessages(ids) {
      if (ids.length === 0) return new Map();
      const reply = await scripts.klymOutboxDue(due, ...ids);
      const scores = Array.isArray(reply) ? reply : [];
      return new Map(ids.flatMap((id, index) => (typeof scores[index] === 'string' && scores[index] !== '' ? [[id, Number(scores[index])] as const] : [])));
    },
  };
}

function claimedOf(reply: ScriptReply, leaseUntil: number): ClaimedWebhookMessage {
  const flat = Array.isArray(reply) ? reply.map(String) : [];
  const fields = new Map<string, string>();
  for (let index = 0; index + 1 < flat.length; index += 2) fields.set(flat[index] as string, flat[index + 1] as string);
  const text = (name: string): string => fields.get(name) ?? '';
  return {
    id: text('id'),
    taskId: text('taskId'),
    endpoint: text('endpoint'),
    type: text('type') as OutboxEventType,
    payload: text('payload'),
    createdAt: Number(text('createdAt')),
    attempts: Number(text('attempts')),
    nextAttemptAt: Number(text('nextAttemptAt')),
    lease: text('lease'),
    leaseUntil,
  };
}
