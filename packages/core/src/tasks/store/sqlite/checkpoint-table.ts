import type { DatabaseSync } from 'node:sqlite';
import type { ModelMessage } from 'ai';
import type { AgentCheckpoint } from '../../../agent/types.ts';
import { KlymError } from '../../../errors.ts';

/**
 * Run checkpoints in the `checkpoints` table, their messages one row each in `checkpoint_messages`. A
 * run's conversation only grows between saves, so a save writes only the messages after those it wrote
 * last time, and rewrites from the first one that differs when the run changed an earlier one.
 */
export interface CheckpointTable {
  /** Writes `checkpoint` as the task's; to be called inside a transaction, then {@link remember}ed after it commits. */
  write(id: string, checkpoint: AgentCheckpoint): void;
  /** Records which messages are now stored for `id`, so the next save appends after them. */
  remember(id: string, messages: readonly ModelMessage[]): void;
  read(id: string): AgentCheckpoint | undefined;
  /** Forgets what this process knows of `id`'s stored messages (its run ended, or it was evicted). */
  forget(id: string): void;
}

/** Creates the {@link CheckpointTable} of `db`, whose schema has the checkpoint tables. */
export function createCheckpointTable(db: DatabaseSync): CheckpointTable {
  const selectTask = db.prepare('SELECT 1 FROM tasks WHERE id = ?');
  const selectCheckpoint = db.prepare('SELECT state, message_count AS count FROM checkpoints WHERE task_id = ?');
  const upsertCheckpoint = db.prepare(
    'INSERT INTO checkpoints (task_id, state, message_count) VALUES (?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, message_count = excluded.message_count',
  );
  const selectMessages = db.prepare('SELECT message FROM checkpoint_messages WHERE task_id = ? ORDER BY idx');
  const insertMessage = db.prepare('INSERT INTO checkpoint_messages (task_id, idx, message) VALUES (?, ?, ?)');
  const deleteMessagesFrom = db.prepare('DELETE FROM checkpoint_messages WHERE task_id = ? AND idx >= ?');

  // Per running task, the messages its last save stored (a copy of the array; the messages themselves are
  // shared with the run). The identity of each message says it is stored already: cheaper than comparing JSON.
  const stored = new Map<string, readonly ModelMessage[]>();

  return {
    write(id, checkpoint) {
      if (selectTask.get(id) === undefined) throw new KlymError('TASK_NOT_FOUND', `Cannot save a checkpoint of task ${id}: no such task is stored`);
      const { messages, ...state } = checkpoint;
      const row = selectCheckpoint.get(id) as { count: number } | undefined;
      const count = row?.count ?? 0;
      const known = stored.get(id);
      // Until the transaction commits, what is stored is unknown; remember() says it again after.
      stored.delete(id);
      let same = 0;
      if (known !== undefined && known.length === count) {
        const limit = Math.min(count, messages.length);
        while (same < limit && messages[same] === known[same]) same++;
      }
      if (same < count) deleteMessagesFrom.run(id, same);
      for (let index = same; index < messages.length; index++) insertMessage.run(id, index, JSON.stringify(messages[index]));
      upsertCheckpoint.run(id, JSON.stringify(state), messages.length);
    },
    remember(id, messages) {
      stored.set(id, [...messages]);
    },
    read(id) {
      const row = selectCheckpoint.get(id) as { state: string } | undefined;
      if (row === undefined) return undefined;
      const messages = (selectMessages.all(id) as { message: string }[]).map((item) => JSON.parse(item.message) as ModelMessage);
      // A resumed run continues from these very objects, so its first save appends too. A run saving
      // in this process already is not disturbed by someone reading its checkpoint.
      if (!stored.has(id)) stored.set(id, [...messages]);
      return { ...(JSON.parse(row.state) as Omit<AgentCheckpoint, 'messages'>), messages };
    },
    forget(id) {
      stored.delete(id);
    },
  };
}
