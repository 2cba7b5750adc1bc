// The runner thread's setup module (`ThreadRunnerOptions.setup`) when tracing is on: the thread has
// globals of its own, so it starts the same SDK from the same `OTEL_*` environment (a Worker gets a copy of
// the process's), and the runs on it make their spans through it. `close()` flushes them when the thread ends.
import { startTracing } from './start-tracing.ts';

const tracing = startTracing(process.env);

/** Exports the spans still buffered; the runner thread calls it when it closes. */
export async function close(): Promise<void> {
  await tracing?.close();
}
