import { newQuickJSWASMModule, RELEASE_SYNC, type QuickJSContext, type QuickJSHandle } from 'quickjs-emscripten';
import { KlymError } from '../errors.ts';

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
  /** Aborting it interrupts the program at its next instruction or host call. */
  readonly signal?: AbortSignal;
}

/** What a program answered: a string as it is, anything else as its JSON text; `undefined` when it returned nothing. */
export type ProgramAnswer = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'json'; readonly text: string } | undefined;

// Inside the sandbox: the host functions as async globals over one bridge, JSON both ways, and no clock
// (`Date.now()`, `new Date()`): a program that cannot see time answers the same when it is run again.
const PRELUDE = (names: readonly string[]): string => `(() => {
  const bridge = globalThis.__klymHost;
  delete globalThis.__klymHost;
  for (const name of ${JSON.stringify(names)}) {
    globalThis[name] = async (...args) => {
      const answer = await bridge(name, JSON.stringify(args, (key, value) => (value === undefined ? null : value)));
      return answer === undefined ? undefined : JSON.parse(answer);
    };
  }
  const NoClockDate = new Proxy(Date, {
    construct(target, args) {
      if (args.length === 0) throw new Error('There is no clock in the sandbox: new Date() needs a value');
      return new target(...args);
    },
    apply() { throw new Error('There is no clock in the sandbox: Date() needs a value'); },
  });
  Date.now = () => { throw new Error('There is no clock in the sandbox: Date.now() is not available'); };
  globalThis.Date = NoClockDate;
})();`;

/**
 * Runs `code` in a QuickJS runtime of its own (WebAssembly, a fresh module per program, so nothing one program
 * leaves behind, a grown heap included, outlives it): no file system, network, process or clock, only `host`.
 * The memory limit is QuickJS's allocator's; the time limit and `signal` are checked by its interrupt handler while
 * the program computes and by a timer while it waits for a host call.
 *
 * @throws {KlymError} `CODE_FAILED` when the program throws, does not parse, returns what is not JSON, or passes
 * a limit (the message names `code.memoryMiB` or `code.timeoutMs` and its value); `ABORTED` when `signal` aborts.
 */
export async function runInSandbox(options: SandboxOptions): Promise<ProgramAnswer> {
  const { memoryMiB, timeoutMs, signal } = options;
  signal?.throwIfAborted();
  const deadline = performance.now() + timeoutMs;
  const timeUp = (): KlymError => new KlymError('CODE_FAILED', `The program ran past its time limit: code.timeoutMs is ${timeoutMs} ms`, { limit: timeoutMs });
  const outOfMemory = (): KlymError => new KlymError('CODE_FAILED', `The program ran out of memory: code.memoryMiB is ${memoryMiB} MiB`, { limit: memoryMiB });
  const stopped = (): KlymError | undefined => (signal?.aborted === true ? cancelled() : performance.now() >= deadline ? timeUp() : undefined);

  const module = await newQuickJSWASMModule(RELEASE_SYNC);
  const runtime = module.newRuntime();
  runtime.setMemoryLimit(memoryMiB * 1024 * 1024);
  runtime.setInterruptHandler(() => stopped() !== undefined);
  const vm = runtime.newContext();
  let settle: ((error: KlymError | undefined) => void) | undefined;
  const waiting = new Promise<KlymError | undefined>((resolve) => (settle = resolve));
  // While the program waits for a host call, no instruction runs to meet the interrupt handler: these end the wait.
  const onAbort = (): void => settle?.(cancelled());
  const timer = setTimeout(() => settle?.(timeUp()), Math.max(0, deadline - performance.now()));
  signal?.addEventListener('abort', onAbort, { once: true });
  let calls: { outstanding: number } | undefined;
  try {
    // A failure past the program's own code: out of memory, interrupted, or what it threw.
    const failure = (handle: QuickJSHandle): KlymError => {
      const dumped: unknown = vm.dump(handle);
      handle.dispose();
      const stop = stopped();
      if (stop !== undefined) return stop;
      const error = dumped as { name?: unknown; message?: unknown } | undefined;
      const text = typeof error === 'object' && error !== null ? `${String(error.name ?? 'Error')}: ${String(error.message ?? '')}` : String(dumped);
      if (/out of memory/i.test(text)) return outOfMemory();
      return new KlymError('CODE_FAILED', `The program failed: ${text}`);
    };
    let pump: (() => void) | undefined;
    calls = installHost(
      vm,
      options.host,
      () => pump?.(),
      () => settle !== undefined,
    );
    const prelude = vm.evalCode(PRELUDE(Object.keys(options.host)), 'prelude.js');
    if (prelude.error !== undefined) throw failure(prelude.error);
    prelude.value.dispose();

    const evaluated = vm.evalCode(
      `(async () => {\n${options.code}\n})().then((value) => (value === undefined ? undefined : typeof value === 'string' ? { kind: 'text', text: value } : { kind: 'json', text: JSON.stringify(value) }))`,
      'program.js',
    );
    if (evaluated.error !== undefined) throw failure(evaluated.error);
    const promise = evaluated.value;
    let answer: ProgramAnswer;
    // Run after every host answer: the program goes on until it waits again, then its promise says where it is.
    pump = (): void => {
      const jobs = runtime.executePendingJobs();
      if (jobs.error !== undefined) return settle?.(failure(jobs.error));
      const state = vm.getPromiseState(promise);
      if (state.type === 'rejected') settle?.(failure(state.error));
      else if (state.type === 'fulfilled') {
        answer = vm.dump(state.value) as ProgramAnswer;
        state.value.dispose();
        settle?.(undefined);
      }
    };
    pump();
    const error = await waiting;
    promise.dispose();
    if (error !== undefined) throw error;
    return answer;
  } finally {
    settle = undefined;
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    // A program stopped while it computed or waited still holds live objects, and freeing its runtime then fails
    // an assertion inside QuickJS (aborting the module): the module is this program's alone, so it goes whole to the
    // garbage collector instead, its memory with it.
    if (calls?.outstanding === 0 && stopped() === undefined) {
      try {
        vm.dispose();
        runtime.dispose();
      } catch {
        // An object the program left alive (a promise it never awaited): the module goes whole, as above.
      }
    }
  }
}

const cancelled = (): KlymError => new KlymError('ABORTED', 'The program was interrupted: its task was cancelled');

/** The one bridge the prelude wraps: `__klymHost(name, argsJson)` → a Promise of the answer's JSON text. */
function installHost(vm: QuickJSContext, host: SandboxOptions['host'], pump: () => void, running: () => boolean): { outstanding: number } {
  const calls = { outstanding: 0 };
  const bridge = vm.newFunction('__klymHost', (nameHandle, argsHandle) => {
    const name = vm.getString(nameHandle);
    const args = JSON.parse(vm.getString(argsHandle)) as unknown[];
    const deferred = vm.newPromise();
    const call = host[name];
    const pending = call === undefined ? Promise.reject(new Error(`No host function ${name}`)) : call(args);
    calls.outstanding++;
    pending
      .finally(() => calls.outstanding--)
      .then(
        (value) => {
          if (!running()) return;
          if (value === undefined) deferred.resolve();
          else vm.newString(JSON.stringify(value)).consume((handle) => deferred.resolve(handle));
        },
        (error: unknown) => {
          if (!running()) return;
          const message = error instanceof Error ? error.message : String(error);
          const code = error instanceof KlymError ? error.code : undefined;
          vm.newError({ name: code === undefined ? 'Error' : `KlymError ${code}`, message }).consume((handle) => deferred.reject(handle));
        },
      );
    void deferred.settled.then(() => {
      deferred.dispose();
      if (running()) pump();
    });
    return deferred.handle;
  });
  vm.setProp(vm.global, '__klymHost', bridge);
  bridge.dispose();
  return calls;
}
