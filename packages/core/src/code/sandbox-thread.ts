// The thread a program runs on (see `sandbox.ts`): QuickJS computes here, never on the thread of the runs, and
// each host call is a message to that thread and an answer back. The thread loads QuickJS, says it is ready, and
// runs the one program it is then given; it is the program's alone and is terminated when the program ends, is
// cancelled or passes its time: nothing it allocated outlives it.
import { parentPort } from 'node:worker_threads';
import { newQuickJSWASMModule, RELEASE_SYNC, type QuickJSContext, type QuickJSHandle } from 'quickjs-emscripten';
import type { FromSandboxThread, SandboxProgram, ToSandboxThread } from './sandbox-messages.ts';

const port = parentPort;
if (port === null) throw new Error('sandbox-thread.ts runs as a worker thread');
const post = (message: FromSandboxThread): void => port.postMessage(message);

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

const module = await newQuickJSWASMModule(RELEASE_SYNC);
const runtime = module.newRuntime();
const vm = runtime.newContext();
let ended = false;

/** A failure past the program's own code: out of memory, or what it threw. */
function fail(handle: QuickJSHandle): void {
  const dumped: unknown = vm.dump(handle);
  handle.dispose();
  const error = dumped as { name?: unknown; message?: unknown } | undefined;
  const text = typeof error === 'object' && error !== null ? `${String(error.name ?? 'Error')}: ${String(error.message ?? '')}` : String(dumped);
  end({ type: 'failed', memory: /out of memory/i.test(text), message: text });
}

function end(message: FromSandboxThread): void {
  if (ended) return;
  ended = true;
  post(message);
}

const pending = new Map<number, ReturnType<QuickJSContext['newPromise']>>();
let nextCall = 0;
let pump = (): void => {};

const bridge = vm.newFunction('__klymHost', (nameHandle, argsHandle) => {
  const id = ++nextCall;
  const deferred = vm.newPromise();
  pending.set(id, deferred);
  post({ type: 'call', id, name: vm.getString(nameHandle), args: vm.getString(argsHandle) });
  void deferred.settled.then(() => {
    deferred.dispose();
    pump();
  });
  return deferred.handle;
});
vm.setProp(vm.global, '__klymHost', bridge);
bridge.dispose();

port.on('message', (message: ToSandboxThread) => {
  if (message.type === 'start') return run(message);
  const deferred = pending.get(message.id);
  if (deferred === undefined || ended) return;
  pending.delete(message.id);
  if (message.error !== undefined) vm.newError(message.error).consume((handle) => deferred.reject(handle));
  else if (message.value === undefined) deferred.resolve();
  else vm.newString(message.value).consume((handle) => deferred.resolve(handle));
});

// V8 compiles a WASM module's functions as they are first called: a program on a fresh module would pay for QuickJS's
// parser, promises and JSON being compiled. A throwaway context runs them first, while the thread waits for a program.
{
  const warmUp = runtime.newContext();
  const warmed = warmUp.evalCode(
    `${PRELUDE([])}; (async () => { const m = new Map([[1, JSON.parse('{"a":[1,"b"]}')]]); await null; return JSON.stringify([...m]); })()`,
  );
  if (warmed.error === undefined) warmed.value.dispose();
  else warmed.error.dispose();
  runtime.executePendingJobs();
  warmUp.dispose();
}
post({ type: 'ready' });

function run(data: SandboxProgram): void {
  runtime.setMemoryLimit(data.memoryMiB * 1024 * 1024);
  const prelude = vm.evalCode(PRELUDE(data.names), 'prelude.js');
  if (prelude.error !== undefined) return fail(prelude.error);
  prelude.value.dispose();
  const evaluated = vm.evalCode(
    `(async () => {\n${data.code}\n})().then((value) => (value === undefined ? undefined : typeof value === 'string' ? { kind: 'text', text: value } : { kind: 'json', text: JSON.stringify(value) }))`,
    'program.js',
  );
  if (evaluated.error !== undefined) return fail(evaluated.error);
  const promise = evaluated.value;
  // Run after every host answer: the program goes on until it waits again, then its promise says where it is.
  pump = (): void => {
    if (ended) return;
    const jobs = runtime.executePendingJobs();
    if (jobs.error !== undefined) return fail(jobs.error);
    const state = vm.getPromiseState(promise);
    if (state.type === 'rejected') fail(state.error);
    else if (state.type === 'fulfilled') {
      const answer = vm.dump(state.value) as { kind: 'text' | 'json'; text: string } | undefined;
      state.value.dispose();
      end({ type: 'ended', ...(answer === undefined ? {} : { answer }) });
    }
  };
  pump();
}
