/** The host calls of a program that a resume can replay: an upstream tool's call or a sub-call. */
export type RecordedHostCall = 'callTool' | 'llm' | 'llmMap';

/**
 * One host call of a `klym__run_code` program as the run's checkpoint keeps it (`InFlightToolCall.hostCalls`), so
 * that a run resumed after a crash, re-running the program from its start, finds it by its number, its function,
 * its tool and its arguments. Plain JSON data.
 */
export interface HostCallRecord {
  /** The program's host call number, from 1 (every host function counts, `log` included). */
  readonly call: number;
  readonly name: RecordedHostCall;
  /** The upstream tool of a `callTool`. */
  readonly target?: string;
  /** The arguments the program gave, as JSON. */
  readonly args: unknown;
  /** What the program was given: the answer, or the error's message. Absent: the call was sent and its outcome is unknown. */
  readonly outcome?: { readonly value: unknown } | { readonly error: string };
}

/**
 * When a host call's record is saved: `before-call`, before a write is sent (waited for; the call fails unsent,
 * `STORE_UNAVAILABLE`, when it cannot be stored); `now`, a write's outcome; `soon`, a read's or a sub-call's
 * outcome, with the next save or within a fraction of a second (a program's hundreds of reads are not each a
 * write of the whole checkpoint; a crash meanwhile only costs making them again).
 */
export type HostCallSave = 'before-call' | 'now' | 'soon';

/** Where a run keeps its programs' host calls as they happen: its checkpoints. */
export interface ProgramRecorder {
  /**
   * The program (the `klym__run_code` call `toolCallId`, its `code`) is about to run: recorded as a call under way
   * before its first host call. A Promise when the record is stored on another thread: the program waits for it.
   */
  started(toolCallId: string, code: string): Promise<void> | undefined;
  /**
   * A host call, recorded (a record replaces the program's earlier one of the same number) and saved
   * {@link HostCallSave `when`}.
   */
  hostCall(toolCallId: string, record: HostCallRecord, when: HostCallSave): Promise<void> | undefined;
}

/** What a program re-run after a crash is given for a call that a write tool was sent but whose result was never recorded. */
export const INTERRUPTED_HOST_CALL_MESSAGE =
  'This call was sent before a restart of Klym interrupted the program, and its result was not recorded: its outcome is unknown, it may or may not have taken effect. Klym did not send it again; check before calling it again.';

/**
 * The record of an interrupted program, read as it runs again: its call `n` is the recorded call `n` while the
 * program makes the same calls (function, tool, arguments) as before; from the first that differs it has taken
 * another path, and nothing more is replayed.
 */
export interface Replay {
  /** The record of the program's call `n`, when it is the same call; `undefined` to make it afresh. */
  find(call: number, name: RecordedHostCall, target: string | undefined, args: unknown): HostCallRecord | undefined;
}

/** A replay of `records` (none: a first run, nothing to replay). */
export function createReplay(records: readonly HostCallRecord[] | undefined): Replay {
  const byCall = new Map((records ?? []).map((record) => [record.call, record]));
  let diverged = byCall.size === 0;
  return {
    find(call, name, target, args) {
      if (diverged) return undefined;
      const record = byCall.get(call);
      // A read-only call cut off before it answered is not recorded: the next ones may still be.
      if (record === undefined) return undefined;
      if (record.name !== name || record.target !== target || JSON.stringify(record.args) !== JSON.stringify(args)) {
        diverged = true;
        return undefined;
      }
      return record;
    },
  };
}
