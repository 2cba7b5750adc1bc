// Preloaded into a real `klym serve` by tests (`node --import` this file). Node preloads it into every
// thread, the runner thread included; there it watches the runs the main thread hands over and, for a
// prompt that asks for it, ends the thread the ways a bug could: `crash: exit` calls `process.exit(3)`,
// `crash: throw` throws from a timer callback (which nothing can catch), and `crash: reject` leaves a
// rejected promise unhandled without ending anything. Klym has no known path that does any of these (each
// would be a bug to fix), and its production code carries no hook for them; Node's own `--import` does.
import { isMainThread, parentPort } from 'node:worker_threads';

if (!isMainThread) {
  parentPort?.on('message', (batch: readonly { type?: string; options?: { prompt?: string } }[]) => {
    for (const message of batch) {
      const prompt = message.type === 'run' ? message.options?.prompt : undefined;
      if (prompt === 'crash: exit') process.exit(3);
      if (prompt === 'crash: throw') {
        setImmediate(() => {
          throw new Error('the fixture broke the runner thread');
        });
      }
      if (prompt === 'crash: reject') void Promise.reject(new Error('the fixture left a rejection on the runner thread'));
    }
  });
}
