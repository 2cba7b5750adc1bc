import type { ModelMessage } from 'ai';
import { KlymError } from '../errors.ts';
import type { ToolResultOutput } from '../tools/tool-result.ts';
import type { StepProgress } from './run-step.ts';
import type { HostCallRecord, HostCallSave } from '../code/program-record.ts';
import type { AgentCheckpoint, CheckpointTaken, InFlightToolCall } from './types.ts';

/** What a model reads for a call that was sent but whose result was never recorded. */
export const INTERRUPTED_CALL_MESSAGE =
  'This tool call was interrupted by a restart of Klym before its result was recorded. Its outcome is unknown: it may or may not have taken effect. Klym did not retry it; check before calling it again.';

/** How long a read's or a sub-call's record of a program may wait for its save, in milliseconds. */
export const HOST_CALL_SAVE_MS = 250;

const BEFORE_CALL: CheckpointTaken = Object.freeze({ beforeCall: true });
const NOT_BEFORE_CALL: CheckpointTaken = Object.freeze({ beforeCall: false });

/** A run's state at the end of its last completed step: a checkpoint without `current` and `elapsedMs`. */
export type CompletedRun = Omit<AgentCheckpoint, 'current' | 'elapsedMs'>;

/**
 * Hands a run's checkpoints to `onCheckpoint`: after each step, and around each tool call of the step under
 * way. Also what the step reports its progress to (text streamed, calls answered).
 */
export interface Checkpointer extends StepProgress {
  /** A step starts after `done`. */
  beginStep(step: number, done: CompletedRun): void;
  /**
   * A call's request is about to go to the upstream: recorded before it is sent. A Promise when the
   * listener returned one (a store on another thread): the call waits for it.
   */
  sent(call: Omit<InFlightToolCall, 'output'>): Promise<void> | undefined;
  /**
   * A program's host call (`klym__run_code` call `toolCallId`, already recorded by `sent`), kept with that call:
   * `before-call`, saved and waited for as `sent` is (a write before it goes); `now`, saved as an answer is;
   * `soon`, saved with the next checkpoint or after {@link HOST_CALL_SAVE_MS}, whichever comes first.
   */
  hostCall(toolCallId: string, record: HostCallRecord, when: HostCallSave): Promise<void> | undefined;
  /** A step ended: `done` now includes it. */
  endStep(done: CompletedRun): void;
  /**
   * A step ended by asking the caller: `parked` (its completed steps, and the asking step as `current`, its
   * ask without a result) is saved, and waited for, as a checkpoint before a call is: a run parks only once its
   * question is recorded. @throws {KlymError} `STORE_UNAVAILABLE` when it could not be stored
   */
  park(parked: CompletedRun & { readonly current: NonNullable<AgentCheckpoint['current']> }): Promise<void> | undefined;
  /** A resumed run goes on with a parked step (to send its approved calls): `parked` is where it stands, not saved again. */
  reopen(parked: CompletedRun & { readonly current: NonNullable<AgentCheckpoint['current']> }): void;
  /** Where the run stands now, as the next checkpoint would say it. @throws {Error} before the run's first step */
  snapshot(): AgentCheckpoint;
}

/**
 * The checkpointer of one run. `elapsedMs` reads the run's time (a resumed checkpoint's included). A
 * listener that throws (or returns a Promise that rejects) has failed to store the checkpoint: before a
 * call's request, the call then fails unsent (`STORE_UNAVAILABLE`); any other time, the run goes on.
 */
export function createCheckpointer(
  onCheckpoint: ((checkpoint: AgentCheckpoint, taken: CheckpointTaken) => void) | undefined,
  elapsedMs: () => number,
): Checkpointer {
  let done: CompletedRun | undefined;
  let current: { step: number; text: string; calls: InFlightToolCall[] } | undefined;
  /**
   * `strict`: a listener that fails is rethrown as {@link unsent}, and one that returned a Promise is
   * waited for, so that a call whose record could not be stored is not sent.
   */
  // Fresh arrays each time: a listener may keep a checkpoint, and the run goes on changing its own.
  const snapshot = (completed: CompletedRun): AgentCheckpoint => ({
    ...completed,
    elapsedMs: elapsedMs(),
    ...(current === undefined ? {} : { current: { step: current.step, text: current.text, calls: [...current.calls] } }),
  });
  // A `soon` host call's save, waiting: any save before it holds that record too.
  let soon: NodeJS.Timeout | undefined;
  const save = (strict = false): Promise<void> | undefined => {
    clearTimeout(soon);
    soon = undefined;
    if (onCheckpoint === undefined || done === undefined) return undefined;
    const checkpoint = snapshot(done);
    try {
      const returned: unknown = onCheckpoint(checkpoint, strict ? BEFORE_CALL : NOT_BEFORE_CALL);
      if (returned instanceof Promise) {
        if (strict)
          return returned.then(
            () => {},
            (error: unknown) => Promise.reject(unsent(error)),
          );
        returned.catch(() => {});
      }
    } catch (error) {
      if (strict) throw unsent(error);
      // Any other checkpoint that failed to store only costs how far a restart can resume from.
    }
    return undefined;
  };
  return {
    beginStep(step, completed) {
      done = completed;
      current = { step, text: '', calls: [] };
    },
    text(delta) {
      if (current !== undefined) current.text += delta;
    },
    sent(call) {
      const step = current;
      if (step === undefined) return undefined;
      // An approved call is in the step already, unsent: it is recorded as sent in its place.
      const earlier = step.calls.findIndex((recorded) => recorded.toolCallId === call.toolCallId);
      const before = step.calls[earlier];
      const sending: InFlightToolCall = { toolCallId: call.toolCallId, toolName: call.toolName, input: call.input };
      if (before === undefined) step.calls.push(sending);
      else step.calls[earlier] = { ...sending, ...(before.approval === undefined ? {} : { approval: before.approval }) };
      // By id, not the last: the step's other calls may have been recorded while this one's record was awaited.
      const forget = (error: unknown): never => {
        const index = step.calls.findIndex((recorded) => recorded.toolCallId === call.toolCallId);
        if (index >= 0 && before === undefined) step.calls.splice(index, 1);
        else if (index >= 0) step.calls[index] = before as InFlightToolCall;
        throw error;
      };
      let saved: Promise<void> | undefined;
      try {
        saved = save(true);
      } catch (error) {
        forget(error);
      }
      return saved?.catch(forget);
    },
    answered(toolCallId, output) {
      const index = current?.calls.findIndex((call) => call.toolCallId === toolCallId) ?? -1;
      // A call refused before it was sent (denied, invalid) was never recorded, and needs no record.
      if (current === undefined || index < 0) return;
      current.calls[index] = { ...(current.calls[index] as InFlightToolCall), output };
      save();
    },
    hostCall(toolCallId, record, when) {
      const index = current?.calls.findIndex((call) => call.toolCallId === toolCallId) ?? -1;
      if (current === undefined || index < 0) return undefined;
      const call = current.calls[index] as InFlightToolCall;
      const hostCalls = (call.hostCalls ?? []).filter((earlier) => earlier.call !== record.call);
      const step = current;
      step.calls[index] = { ...call, hostCalls: [...hostCalls, record] };
      if (when === 'now') return save();
      if (when === 'soon') {
        if (onCheckpoint !== undefined && soon === undefined) {
          soon = setTimeout(() => save(), HOST_CALL_SAVE_MS);
          soon.unref();
        }
        return undefined;
      }
      // A record that could not be stored goes: the call is not sent, and a later checkpoint must not say it was.
      const forget = (error: unknown): never => {
        const at = step.calls.findIndex((recorded) => recorded.toolCallId === toolCallId);
        const recorded = step.calls[at];
        if (recorded !== undefined) step.calls[at] = { ...recorded, hostCalls: (recorded.hostCalls ?? []).filter((earlier) => earlier !== record) };
        throw error;
      };
      try {
        return save(true)?.catch(forget);
      } catch (error) {
        return forget(error);
      }
    },
    endStep(completed) {
      done = completed;
      current = undefined;
      save();
    },
    park({ current: asking, ...completed }) {
      done = completed;
      current = { step: asking.step, text: asking.text, calls: [...asking.calls] };
      return save(true);
    },
    snapshot() {
      if (done === undefined) throw new Error('No checkpoint before the run’s first step');
      return snapshot(done);
    },
    reopen({ current: parked, ...completed }) {
      done = completed;
      current = { step: parked.step, text: parked.text, calls: [...parked.calls] };
    },
  };
}

/** A call sent without its record could be replayed after a restart: it fails instead, and the model reads why. */
function unsent(error: unknown): KlymError {
  const reason = error instanceof Error ? error.message : String(error);
  return new KlymError('STORE_UNAVAILABLE', `The call was not sent: its record could not be stored (${reason})`, { cause: error });
}

/** A checkpoint made ready to go on from: the conversation to continue, and the calls whose outcome is unknown. */
export interface ResumedRun {
  /** The checkpoint's messages, then the interrupted step's calls with their results (recorded or unknown). */
  readonly messages: ModelMessage[];
  /** Each completed step's text, and the interrupted step's. */
  readonly texts: string[];
  /** Tool calls of the completed steps and of the interrupted one. */
  readonly toolCalls: number;
  /** Ids of the calls that were sent but have no recorded result. */
  readonly interruptedCalls: string[];
}

/**
 * Turns a checkpoint into the conversation a resumed run continues: each call of the step under way gets
 * a result, its recorded one or an `error-text` saying its outcome is unknown ({@link INTERRUPTED_CALL_MESSAGE}).
 * A call the checkpoint's last step left without a result (a step cut off by an abort) is treated the
 * same way rather than dropped, so the model knows it was sent. Nothing is ever sent again; the
 * checkpoint's messages stay a prefix of the result, unchanged.
 */
export function resumeFrom(checkpoint: AgentCheckpoint): ResumedRun {
  const messages: ModelMessage[] = [...checkpoint.messages];
  const texts = [...checkpoint.texts];
  const interruptedCalls: string[] = [];
  const unknown = (toolCallId: string): ToolResultOutput => {
    interruptedCalls.push(toolCallId);
    return { type: 'error-text', value: INTERRUPTED_CALL_MESSAGE };
  };

  const tail = unansweredTailCalls(messages);
  if (tail.length > 0) {
    messages.push({
      role: 'tool',
      content: tail.map((call) => ({ type: 'tool-result' as const, toolCallId: call.toolCallId, toolName: call.toolName, output: unknown(call.toolCallId) })),
    });
  }

  const calls = checkpoint.current?.calls ?? [];
  const text = checkpoint.current?.text ?? '';
  if (calls.length > 0) {
    const assistant: Extract<ModelMessage, { role: 'assistant' }>['content'] = [];
    if (text !== '') assistant.push({ type: 'text', text });
    for (const call of calls) assistant.push({ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input: call.input });
    messages.push(
      { role: 'assistant', content: assistant },
      {
        role: 'tool',
        content: calls.map((call) => ({
          type: 'tool-result' as const,
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          output: call.output ?? (call.approval === undefined ? unknown(call.toolCallId) : unsentCall(call.approval)),
        })),
      },
    );
    if (text !== '') texts.push(text);
  }
  return { messages, texts, toolCalls: checkpoint.toolCalls + calls.length, interruptedCalls };
}

/** What a model reads for a call that waited for approval and was never sent (a run resumed before its reply was given). */
function unsentCall(approval: NonNullable<InFlightToolCall['approval']>): ToolResultOutput {
  return {
    type: 'error-text',
    value:
      approval === 'approved'
        ? 'This call was approved but not sent before the run stopped; it was not sent.'
        : 'This call waited for the caller’s approval and was not sent.',
  };
}

/**
 * Tool calls of the last assistant message that have no result, when only tool messages follow it: the
 * calls of a step cut off mid-call. A result can be appended after them; orphans elsewhere cannot, and
 * are left to `removeOrphanedToolCalls`.
 */
function unansweredTailCalls(messages: readonly ModelMessage[]): { toolCallId: string; toolName: string }[] {
  let index = messages.length - 1;
  while (index >= 0 && messages[index]?.role === 'tool') index--;
  const assistant = messages[index];
  if (assistant?.role !== 'assistant' || typeof assistant.content === 'string') return [];
  const answered = new Set<string>();
  for (const message of messages.slice(index + 1)) {
    if (typeof message.content === 'string') continue;
    for (const part of message.content) if (part.type === 'tool-result') answered.add(part.toolCallId);
  }
  return assistant.content.flatMap((part) =>
    part.type === 'tool-call' && part.providerExecuted !== true && !answered.has(part.toolCallId)
      ? [{ toolCallId: part.toolCallId, toolName: part.toolName }]
      : [],
  );
}

/**
 * Cheap checks of a checkpoint passed as `resume` (it may come from a store).
 * @throws {KlymError} `CONFIG_INVALID` naming the field, e.g. ``Expected `resume.steps` to be an integer ≥ 0, got -1``.
 */
export function assertCheckpoint(checkpoint: AgentCheckpoint): void {
  if (typeof checkpoint !== 'object' || checkpoint === null) fail('', 'a checkpoint', checkpoint);
  const { steps, messages, texts, usage, elapsedMs, toolCalls, current } = checkpoint;
  if (!Number.isInteger(steps) || steps < 0) fail('steps', 'an integer ≥ 0', steps);
  if (!Array.isArray(messages)) fail('messages', 'an array', typeof messages);
  if (messages.some((message) => message?.role === 'system')) fail('messages', 'without system messages', 'a system message');
  if (!Array.isArray(texts) || texts.some((text) => typeof text !== 'string')) fail('texts', 'an array of strings', texts);
  if (typeof usage !== 'object' || usage === null || !Number.isFinite(usage.totalTokens)) fail('usage', 'a usage with `totalTokens`', usage);
  if (!Number.isFinite(elapsedMs) || elapsedMs < 0) fail('elapsedMs', 'a number ≥ 0', elapsedMs);
  if (!Number.isInteger(toolCalls) || toolCalls < 0) fail('toolCalls', 'an integer ≥ 0', toolCalls);
  if (current !== undefined && (typeof current !== 'object' || current === null || !Array.isArray(current.calls) || typeof current.text !== 'string')) {
    fail('current', 'a step with `text` and `calls`', current);
  }
}

function fail(field: string, expected: string, value: unknown): never {
  const name = field === '' ? 'resume' : `resume.${field}`;
  throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}
