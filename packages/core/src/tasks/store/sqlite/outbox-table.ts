import type { DatabaseSync } from 'node:sqlite';
import { newLease } from '../../../webhooks/memory-outbox.ts';
import type { ClaimedWebhookMessage, WebhookMessage, WebhookSettlement } from '../../../webhooks/webhook-types.ts';
import { inTransaction } from './transaction.ts';

/** The webhook outbox in the `webhook_outbox` table; every method is synchronous, as the connection is. */
export interface OutboxTable {
  add(messages: readonly WebhookMessage[]): void;
  claim(now: number, leaseMs: number, limit: number): ClaimedWebhookMessage[];
  settle(claim: ClaimedWebhookMessage, settlement: WebhookSettlement): boolean;
  due(ids: readonly string[]): Map<string, number>;
}

interface Row {
  id: string;
  taskId: string;
  endpoint: string;
  type: WebhookMessage['type'];
  payload: string;
  createdAt: number;
  attempts: number;
  nextAttemptAt: number;
}

/** Creates the {@link OutboxTable} of `db`, whose schema has the outbox (version 3). */
export function createOutboxTable(db: DatabaseSync): OutboxTable {
  const insert = db.prepare(
    'INSERT INTO webhook_outbox (id, task_id, endpoint, type, payload, created_at, attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
  );
  const selectDue = db.prepare(
    `SELECT id, task_id AS taskId, endpoint, type, payload, created_at AS createdAt, attempts, next_attempt_at AS nextAttemptAt
     FROM webhook_outbox WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
  );
  const lease = db.prepare('UPDATE webhook_outbox SET lease = ?, next_attempt_at = ? WHERE id = ?');
  const remove = db.prepare('DELETE FROM webhook_outbox WHERE id = ? AND lease = ?');
  const reschedule = db.prepare("UPDATE webhook_outbox SET attempts = ?, next_attempt_at = ?, lease = '' WHERE id = ? AND lease = ?");
  const selectDueOf = db.prepare('SELECT id, next_attempt_at AS nextAttemptAt FROM webhook_outbox WHERE id IN (SELECT value FROM json_each(?))');

  return {
    add(messages) {
      inTransaction(db, () => {
        for (const message of messages) {
          insert.run(message.id, message.taskId, message.endpoint, message.type, message.payload, message.createdAt, message.attempts, message.nextAttemptAt);
        }
      });
    },
    claim(now, leaseMs, limit) {
      // One process per file, and synchronous from the read to the lease: no other claim comes between.
      return inTransaction(db, () =>
        (selectDue.all(now, limit) as unknown as Row[]).map((row) => {
          const claimed: ClaimedWebhookMessage = {
            ...row,
            attempts: Number(row.attempts),
            createdAt: Number(row.createdAt),
            nextAttemptAt: Number(row.nextAttemptAt),
            lease: newLease(),
            leaseUntil: now + leaseMs,
          };
          lease.run(claimed.lease, claimed.leaseUntil, row.id);
          return claimed;
        }),
      );
    },
    settle(claim, settlement) {
      const changed =
        settlement === 'done' ? remove.run(claim.id, claim.lease) : reschedule.run(settlement.attempts, settlement.nextAttemptAt, claim.id, claim.lease);
      return Number(changed.changes) > 0;
    },
    due(ids) {
      const rows = ids.length === 0 ? [] : (selectDueOf.all(JSON.stringify(ids)) as { id: string; nextAttemptAt: number }[]);
      return new Map(rows.map((row) => [row.id, Number(row.nextAttemptAt)]));
    },
  };
}
