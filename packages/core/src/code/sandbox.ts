import { Worker } from 'node:worker_threads';
import { isKlymError, KlymError } from '../errors.ts';
import type { FromSandboxThread, SandboxProgram, ToSandboxThread } from './sandbox-messages.ts';

/** A function the program may await: its arguments and answer cross the boundary as JSON. */
export type HostFunction = (args: readonly unknown[]) => Promise<unknown>;

/** Options of {@link runInSandbox}. */
export interface SandboxOptions {
  /** The body of an async function: `return` gives the answer. */
  readonly code: string;
  /** The functions the program sees as globals, by name; each answers a Promise. */
  readonly host: Readonly<Record<string, HostFunction>>;
  /** The program's heap in MiB (QuickJS's allocator refuses past it). */
  readonly memoryMiB: number;
  /** Wall-clock limit of the program, its host calls' waits included, in milliseconds. */
  readonly timeoutMs: number;
  /** Aborting it interrupts the program at once, whether it computes or waits for a host call. */
  readonly signal?: AbortSignal;
}

/** What a program answered: a string as it is, anything else as its JSON text; `undefined` when it returned nothing. */
export type ProgramAnswer = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'json'; readonly text: string } | undefined;

// Tests and `klym serve --conditions=klym-source` run the sources; the published package runs the build.
const THREAD_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './sandbox-thread.ts' : './sandbox-thread.js', import.meta.url);

/**
 * The thread's own V8 heap, in MiB: it holds only host answers on their way into QuickJS (whose heap is WASM memory,
 * bounded by `memoryMiB`), so a thread past this is a fault of the sandbox, ended like a program out of memory.
 */
const THREAD_HEAP_MIB = 128;

/**
 * Runs `code` in a QuickJS runtime (WebAssembly) on a worker thread of its own, so that a program that computes
 * never holds up the runs beside it: no file system, network, process or clock, only `host`, whose functions run
 * on the caller's thread, each call a message there and an answer back. The memory limit is QuickJS's allocator's;
 * the time limit and `signal` terminate the thread, whether the program computes or waits. The thread is
 * terminated when the program ends, so nothing it left behind, a grown heap included, outlives it.
 *
 * @throws {KlymError} `CODE_FAILED` when the program throws, does not parse, returns what is not JSON, or passes
 * a limit (the message names `code.memoryMiB` or `code.timeoutMs` and its value); `ABORTED` when `signal` aborts.
 */
export async function runInSandbox(options: SandboxOptions): Promise<ProgramAnswer> {
  const { memoryMiB, timeoutMs, signal, host } = options;
  signal?.throwIfAborted();
  const worker = takeThread();
  const outcome = Promise.withResolvers<ProgramAnswer>();
  let settled = false;
  const settle = (error: KlymError | undefined, answer?: ProgramAnswer): void => {
    if (settled) return;
    settled = true;
    void worker.terminate();
    if (error === undefined) outcome.resolve(answer);
    else outcome.reject(error);
  };
  const outOfMemory = (): KlymError => new KlymError('CODE_FAILED', `The program ran out of memory: code.memoryMiB is ${memoryMiB} MiB`, { limit: memoryMiB });
  // A spent budget stops the program with its own reason; a cancel, as a cancel.
  const onAbort = (): void => settle(isKlymError(signal?.reason, 'BUDGET_EXCEEDED') ? signal.reason : cancelled());
  const timer = setTimeout(
    () => settle(new KlymError('CODE_FAILED', `The program ran past its time limit: code.timeoutMs is ${timeoutMs} ms`, { limit: timeoutMs })),
    timeoutMs,
  );
  signal?.addEventListener('abort', onAbort, { once: true });
  const answer = (message: ToSandboxThread): void => {
    // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a Worker's postMessage has no target origin
    if (!settled) worker.postMessage(message);
  };
  const program: SandboxProgram = { code: options.code, names: Object.keys(host), memoryMiB };
  // A warm thread is ready already (its first message was read while it waited); a new one says so when QuickJS is loaded.
  if (warm.has(worker)) answer({ type: 'start', ...program });
  worker.on('message', (message: FromSandboxThread) => {
    switch (message.type) {
      case 'ready':
        return answer({ type: 'start', ...program });
      case 'call': {
        const call = host[message.name];
        const pending = call === undefined ? Promise.reject(new Error(`No host function ${message.name}`)) : call(JSON.parse(message.args) as unknown[]);
        pending.then(
          (value) => answer({ type: 'answer', id: message.id, ...(value === undefined ? {} : { value: JSON.stringify(value) }) }),
          (error: unknown) => {
            const code = error instanceof KlymError ? error.code : undefined;
            answer({
              type: 'answer',
              id: message.id,
              error: { name: code === undefined ? 'Error' : `KlymError ${code}`, message: error instanceof Error ? error.message : String(error) },
            });
          },
        );
        return;
      }
      case 'ended':
        return settle(undefined, message.answer);
      case 'failed':
        return settle(message.memory ? outOfMemory() : new KlymError('CODE_FAILED', `The program failed: ${message.message}`));
    }
  });
  worker.on('error', (error) => {
    const memory = (error as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY';
    settle(memory ? outOfMemory() : new KlymError('CODE_FAILED', `The sandbox failed: ${error.message}`, { cause: error }));
  });
  worker.once('exit', (code) => settle(new KlymError('CODE_FAILED', `The sandbox's thread ended before the program did (exit code ${code})`)));
  try {
    return await outcome.promise;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    replenish();
  }
}

const cancelled = (): KlymError => new KlymError('ABORTED', 'The program was interrupted: its task was cancelled');

/**
 * One thread loaded and waiting, started when a program ends (none until the first program has run): a
 * program's start is then a message, not a thread's and QuickJS's load (figures: docs/benchmarks.md, `code_start_ms`).
 * It is the process's one piece of shared state here, and holds nothing of any program: each thread runs one program
 * and is terminated. Unreferenced while it waits, it never keeps the process alive.
 */
let spare: Worker | undefined;
/** Threads that said they are ready before a program took them. */
const warm = new WeakSet<Worker>();

function startThread(): Worker {
  const worker = new Worker(THREAD_ENTRY, { resourceLimits: { maxOldGenerationSizeMb: THREAD_HEAP_MIB } });
  worker.once('message', (message: FromSandboxThread) => {
    if (message.type === 'ready') warm.add(worker);
  });
  // A spare that fails or exits before it is taken is dropped; the next program starts its own.
  const drop = (): void => {
    if (spare === worker) spare = undefined;
  };
  worker.once('error', drop);
  worker.once('exit', drop);
  return worker;
}

/** The spare thread, or a new one when there is none. */
function takeThread(): Worker {
  const taken = spare ?? startThread();
  spare = undefined;
  taken.ref();
  return taken;
}

/** A spare for the next program, started once a program has ended: never beside a program, whose CPU it would take. */
function replenish(): void {
  if (spare !== undefined) return;
  spare = startThread();
  spare.unref();
}
