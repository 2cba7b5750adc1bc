// Klym's server in its own process for the server benchmarks: started from options given as JSON in
// argv[2], it tells its URL over IPC and answers `stats` (RSS, heap, event-loop delay since the last
// `reset`, tasks by status) and `gc`. Run with --expose-gc so that memory figures are after a collection.
// Beside it, on a thread of the same process that does nothing else, a trivial HTTP endpoint (`floorUrl`):
// polled with Grynya's polls, it measures what any answer from this process waits for at that moment on
// the machine's cores, so a poll's time can be set against the machine's floor in the same run.
import { once } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { startKlymServer } from '../apps/server/src/server/index.ts';

const options = JSON.parse(process.argv[2] ?? '{}') as Parameters<typeof startKlymServer>[0];
const server = await startKlymServer({ ...options, log: () => {} });
// The server listens before its pool has connected; the figures are of a warm one.
await server.klym.service.pool.warmedUp();
const floor = new Worker(
  `const { createServer } = require('node:http');
  const server = createServer((request, response) => response.end('{}')).listen(0, '127.0.0.1', () => require('node:worker_threads').parentPort.postMessage(server.address().port));`,
  { eval: true },
);
floor.unref();
const [floorPort] = (await once(floor, 'message')) as [number];
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();

const send = (message: unknown): void => void process.send?.(message);
process.on('message', async (message: { type: string }) => {
  if (message.type === 'gc') {
    for (let round = 0; round < 3; round++) (globalThis as { gc?: () => void }).gc?.();
    send({ type: 'gc-done' });
  } else if (message.type === 'reset') {
    delay.reset();
    send({ type: 'reset-done' });
  } else if (message.type === 'stats') {
    const memory = process.memoryUsage();
    const health = await server.klym.service.health();
    const cpu = process.cpuUsage();
    send({
      type: 'stats',
      cpuMs: (cpu.user + cpu.system) / 1e3,
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      delayP99Ms: delay.percentile(99) / 1e6,
      delayMaxMs: delay.max / 1e6,
      tasks: health.tasks,
    });
  } else if (message.type === 'close') {
    await server.close();
    process.exit(0);
  }
});
send({ type: 'ready', mcpUrl: server.mcpUrl, url: server.url, floorUrl: `http://127.0.0.1:${floorPort}/` });
