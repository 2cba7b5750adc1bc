// A runner thread's `setup` module in tests (`createThreadRunner({ setup })`): each runner thread imports it
// before its first run. It wraps the thread's `fetch`, which the AI SDK's providers call for each model
// request, to stand for what a task's own work can do to its thread: a request whose conversation says
// `spin <n> ms` keeps the thread busy that long, synchronously, once its answer arrived (as a tokenizer
// counting a huge tool result would); one that says `crash: exit` ends the thread (`process.exit(3)`), and one
// that says `crash once: <file>` ends it only if that file is not there yet (writing it first).
// Klym's production code carries no hook for either.
import { existsSync, writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

if (!isMainThread) {
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const body = typeof init?.body === 'string' ? init.body : '';
    if (body.includes('crash: exit')) process.exit(3);
    const once = /crash once: ([^\s"\\]+)/.exec(body)?.[1];
    if (once !== undefined && !existsSync(once)) {
      writeFileSync(once, 'crashed');
      process.exit(3);
    }
    const response = await original(input, init);
    const spin = /spin (\d+) ms/.exec(body);
    if (spin !== null) {
      const until = performance.now() + Number(spin[1]);
      while (performance.now() < until) {
        // Busy: nothing else on this thread runs meanwhile.
      }
    }
    return response;
  };
}
