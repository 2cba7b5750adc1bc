import { randomBytes } from 'node:crypto';
import type { ModelMessage } from 'ai';
import type { AgentCheckpoint } from '../../../agent/types.ts';
import { KlymError } from '../../../errors.ts';
import type { RedisKeys } from './redis-keys.ts';
import type { RedisScripts } from './scripts.ts';

/**
 * Run checkpoints: the state in a hash, the messages in a list. A run's conversation only grows between
 * saves, so a save sends only the messages after those its previous save stored, and rewrites from the
 * first one that differs when the run changed an earlier one (as the SQLite store does).
 */
export interface Checkpoints {
  /** Resolves once Redis holds the checkpoint, and every command sent before it on the connection. */
  save(id: string, checkpoint: AgentCheckpoint): Promise<void>;
  load(id: string): Promise<AgentCheckpoint | undefined>;
  /** Forgets what this process knows of `id`'s stored messages (its run ended, or it was evicted). */
  forget(id: string): void;
}

/** Runs whose stored messages a process remembers at most: a run taken over by another process is never forgotten otherwise. */
const REMEMBERED_RUNS = 1_000;

interface Stored {
  /** A copy of the array; the messages themselves are shared with the run, and their identity says they are stored. */
  readonly messages: readonly ModelMessage[];
  /** The save that stored them: the script appends to them only while that save is still the last. */
  readonly version: string;
}

export function createCheckpoints(scripts: RedisScripts, keys: RedisKeys): Checkpoints {
  const stored = new Map<string, Stored>();

  const remember = (id: string, entry: Stored): void => {
    // Re-inserted on every save, so the map's order is least recently saved first.
    stored.delete(id);
    stored.set(id, entry);
    if (stored.size > REMEMBERED_RUNS) stored.delete(stored.keys().next().value as string);
  };

  return {
    async save(id, checkpoint) {
      const { messages, ...state } = checkpoint;
      // Serialized now: what the run changes after this call is not this checkpoint.
      const stateJson = JSON.stringify(state);
      const known = stored.get(id);
      let same = 0;
      if (known !== undefined) {
        const limit = Math.min(known.messages.length, messages.length);
        while (same < limit && messages[same] === known.messages[same]) same++;
      }
      const added = messages.slice(same).map((message) => JSON.stringify(message));
      const version = randomBytes(9).toString('base64url');
      // Remembered before Redis answers: the next save, sent behind this one on the same connection, appends
      // to it. If this one fails, the next finds another version stored and sends every message.
      remember(id, { messages: [...messages], version });
      const send = (keep: number, after: string, messagesJson: readonly string[]) =>
        scripts.klymSaveCheckpoint(keys.task(id), keys.checkpoint(id), keys.messages(id), after, keep, version, stateJson, messages.length, ...messagesJson);
      try {
        let answer = await send(same, known?.version ?? '', added);
        if (answer === 'conflict')
          answer = await send(
            0,
            '',
            messages.map((message) => JSON.stringify(message)),
          );
        if (answer === 'missing') throw new KlymError('TASK_NOT_FOUND', `Cannot save a checkpoint of task ${id}: no such task is stored`);
      } catch (error) {
        if (stored.get(id)?.version === version) stored.delete(id);
        throw error;
      }
    },
    async load(id) {
      const reply = await scripts.klymLoadCheckpoint(keys.checkpoint(id), keys.messages(id));
      if (!Array.isArray(reply)) return undefined;
      const [state, version, ...messagesJson] = reply as string[];
      const messages = messagesJson.map((json) => JSON.parse(json) as ModelMessage);
      // A resumed run continues from these very objects, so its first save appends too. A run saving in
      // this process already is not disturbed by someone reading its checkpoint.
      if (!stored.has(id)) remember(id, { messages: [...messages], version: version ?? '' });
      return { ...(JSON.parse(state ?? '{}') as Omit<AgentCheckpoint, 'messages'>), messages };
    },
    forget(id) {
      stored.delete(id);
    },
  };
}
